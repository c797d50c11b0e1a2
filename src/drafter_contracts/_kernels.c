/* Per-token loops over a shard's flattened Arrow buffers, compiled when the package is installed.
 *
 * kernels.py loads this file's shared library with ctypes and holds the Python-side contract of
 * each function (dtypes, shapes, what the outputs mean); the numpy formulation each loop stands
 * for lives beside its caller, and tests/test_kernels.py holds them to it bit for bit.
 *
 * Plain C99 with no Python headers: nothing here touches a Python object, so the build needs a
 * C compiler only. Each function with an ``ids`` argument exists for int32 and int64 ids (the
 * _i32/_i64 suffix); kernels.py widens any other integer dtype to int64 first. Prefix sums and
 * count buffers come in int32 (every shard of fewer than 2**31 tokens) and int64.
 */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(_WIN32)
#define DC_EXPORT __declspec(dllexport)
#else
#define DC_EXPORT __attribute__((visibility("default")))
#endif

/* Role and TurnProblem codes; kernels.py exports them and tests/test_kernels.py checks them
 * against the enums in spans/labels.py. */
enum { OUTSIDE = 0, HEADER = 1, ASSISTANT = 5, REASONING = 6, TOOL_CALL = 7, ASSISTANT_END = 8, END = 9,
       AFTER_ASSISTANT_END = 10, INJECTED = 11, UNKNOWN_ROLE = 12 };
enum { NO_LEADING_HEADER = 1, HEADER_IN_OPEN_TURN = 2, STRAY_END = 3, UNKNOWN_ROLE_PROBLEM = 4,
       MALFORMED_HEADER = 5, TEXT_OUTSIDE_TURN = 6, UNCLOSED_TURN = 7 };

DC_EXPORT int32_t dc_abi_version(void) { return 6; }

static inline int64_t clip(int64_t v, int64_t hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

/* The ChatML labeller: role, boundary and problem for every token, and for each role run (a new
 * run at every role change and row start) its first position, role and whether it opens a row;
 * returns the number of runs. ``noted`` receives the number of boundary tokens (their positions
 * in ``boundary_at``) and of tokens with a problem.
 * The rules are spans.chatml.label_reference's, read token by token, with one shortcut: a run of
 * ordinary tokens (ids below ``lowest``, the smallest marker id, away from the positions a rule
 * singles out) shares one role and problem and is written as a block. */
#define LABEL_CHATML(NAME, ID_T)                                                                           \
DC_EXPORT int64_t NAME(const ID_T *ids, const int64_t *offsets, int64_t n_rows, int64_t start, int64_t end,\
                       int64_t newline, const uint8_t *role_of_id, int64_t n_roles, const uint8_t *newline_lead,\
                       int64_t n_lead, int64_t think_open, int64_t think_close, int32_t has_think,          \
                       int64_t call_open, int64_t call_close, int32_t has_call, int64_t max_len,            \
                       int64_t lowest, uint8_t *role, uint8_t *boundary, uint8_t *problem, int64_t *run_start, \
                       uint8_t *run_role, uint8_t *run_row_first, int64_t *boundary_at, int64_t *noted)      \
{                                                                                                          \
    const int64_t role_hi = n_roles - 1;                                                                   \
    const int64_t lead_hi = (n_roles < n_lead ? n_roles : n_lead) - 1;                                     \
    int64_t k_runs = 0, k_bd = 0, k_prob = 0;                                                              \
    for (int64_t r = 0; r < n_rows; r++) {                                                                 \
        const int64_t a = offsets[r], b = offsets[r + 1];                                                  \
        /* last opener, end marker, <think>, </think>, <tool_call>, </tool_call> of the row */            \
        int64_t last_s = -1, last_e = -1, lto = -1, ltc = -1, lco = -1, lcc = -1;                          \
        int turn_role = OUTSIDE;                                                                           \
        int current = -1; /* the role of the run open at p (none at a row start) */                        \
        int64_t p = a;                                                                                     \
        while (p < b) {                                                                                    \
            const int64_t t = (int64_t)ids[p];                                                             \
            if (t < lowest && p != a && p != b - 1) {                                                      \
                const int in_turn = last_s >= 0;                                                           \
                const int closed = last_e >= last_s;                                                       \
                if (!(in_turn && ((!closed && p - last_s <= 2) || (closed && p == last_e + 1)))) {         \
                    int64_t q = p + 1;                                                                     \
                    while (q < b - 1 && (int64_t)ids[q] < lowest) q++;                                     \
                    int rl = OUTSIDE, pb = 0;                                                              \
                    if (in_turn) {                                                                         \
                        if (closed) {                                                                      \
                            pb = TEXT_OUTSIDE_TURN;                                                        \
                        } else {                                                                           \
                            rl = turn_role;                                                                \
                            if (rl == ASSISTANT) {                                                         \
                                if (has_think && lto > last_s && lto > ltc) rl = REASONING;                \
                                if (has_call && lco > last_s && lco > lcc) rl = TOOL_CALL;                 \
                            }                                                                              \
                        }                                                                                  \
                    }                                                                                      \
                    if (rl != current) {                                                                   \
                        run_start[k_runs] = p; run_role[k_runs] = (uint8_t)rl; run_row_first[k_runs] = p == a; \
                        k_runs++; current = rl;                                                            \
                    }                                                                                      \
                    memset(role + p, rl, (size_t)(q - p));                                                 \
                    memset(boundary + p, 0, (size_t)(q - p));                                              \
                    memset(problem + p, pb, (size_t)(q - p));                                              \
                    if (pb) k_prob += q - p;                                                               \
                    p = q;                                                                                 \
                    continue;                                                                              \
                }                                                                                          \
            }                                                                                              \
            const int is_s = t == start, is_e = t == end;                                                  \
            const int open_before = last_s > last_e; /* the row's last opener/end marker is an opener */  \
            int prob = 0;                                                                                  \
            if (is_s) {                                                                                    \
                if (open_before) prob = HEADER_IN_OPEN_TURN;                                               \
                int tr = UNKNOWN_ROLE;                                                                     \
                if (p + 1 < b) {                                                                           \
                    const int64_t nt = (int64_t)ids[p + 1];                                                \
                    if (nt != start && nt != end) tr = role_of_id[clip(nt, role_hi)];                      \
                }                                                                                          \
                turn_role = open_before ? INJECTED : tr;                                                   \
                last_s = p;                                                                                \
            } else if (is_e) {                                                                             \
                if (!open_before) prob = STRAY_END;                                                        \
                last_e = p;                                                                                \
            }                                                                                              \
            if (has_think) {                                                                               \
                if (t == think_open) lto = p;                                                              \
                else if (t == think_close) ltc = p;                                                        \
            }                                                                                              \
            if (has_call) {                                                                                \
                if (t == call_open) lco = p;                                                               \
                else if (t == call_close) lcc = p;                                                         \
            }                                                                                              \
            if (p > a && (int64_t)ids[p - 1] == start) { /* the role token of a header */                 \
                if (is_e) prob = MALFORMED_HEADER;                                                         \
                else if (!is_s && role_of_id[clip(t, role_hi)] == UNKNOWN_ROLE) prob = UNKNOWN_ROLE_PROBLEM;\
            }                                                                                              \
            int rl = OUTSIDE, bd = 0, open_tok = 0;                                                        \
            if (last_s >= 0) {                                                                             \
                if (last_e >= last_s) { /* the turn is closed */                                          \
                    if (is_e) {                                                                            \
                        if (open_before) rl = turn_role == ASSISTANT ? ASSISTANT_END : END;                \
                    } else if (p == last_e + 1 && t == newline) {                                          \
                        if (turn_role == ASSISTANT) rl = AFTER_ASSISTANT_END;                              \
                    } else if (prob == 0) {                                                                \
                        prob = TEXT_OUTSIDE_TURN;                                                          \
                    }                                                                                      \
                } else {                                                                                   \
                    open_tok = 1;                                                                          \
                    const int64_t k = p - last_s;                                                          \
                    if (k <= 1) {                                                                          \
                        rl = HEADER;                                                                       \
                    } else if (k == 2) {                                                                   \
                        const int nl_ok = newline_lead[clip(t, lead_hi)] != 0;                             \
                        if (t == newline) {                                                                \
                            rl = HEADER;                                                                   \
                        } else {                                                                           \
                            rl = turn_role;                                                                \
                            bd = nl_ok;                                                                    \
                        }                                                                                  \
                        if (!nl_ok && turn_role != INJECTED && prob == 0) prob = MALFORMED_HEADER;         \
                    } else {                                                                               \
                        rl = turn_role;                                                                    \
                    }                                                                                      \
                    if (rl == ASSISTANT && !bd) {                                                          \
                        int sub = ASSISTANT;                                                               \
                        if (has_think && lto > last_s && (lto > ltc || t == think_close)) sub = REASONING; \
                        if (has_call && lco > last_s && (lco > lcc || t == call_close)) sub = TOOL_CALL;   \
                        rl = sub;                                                                          \
                    }                                                                                      \
                }                                                                                          \
            }                                                                                              \
            if (p == a && !is_s) prob = NO_LEADING_HEADER;                                                 \
            if (p == b - 1 && open_tok && b - a < max_len && prob == 0) prob = UNCLOSED_TURN;              \
            if (rl != current) {                                                                           \
                run_start[k_runs] = p; run_role[k_runs] = (uint8_t)rl; run_row_first[k_runs] = p == a;     \
                k_runs++; current = rl;                                                                    \
            }                                                                                              \
            role[p] = (uint8_t)rl;                                                                         \
            boundary[p] = (uint8_t)bd;                                                                     \
            problem[p] = (uint8_t)prob;                                                                    \
            if (bd) boundary_at[k_bd++] = p;                                                               \
            k_prob += prob != 0;                                                                           \
            p++;                                                                                           \
        }                                                                                                  \
    }                                                                                                      \
    noted[0] = k_bd;                                                                                       \
    noted[1] = k_prob;                                                                                     \
    return k_runs;                                                                                         \
}
LABEL_CHATML(dc_label_chatml_i32, int32_t)
LABEL_CHATML(dc_label_chatml_i64, int64_t)

/* Move the non-zero entries of ``counts`` (in id order) to the sparse outputs, zeroing them: the
 * dense array is a per-process buffer, clean again for the next shard. Returns the entries moved. */
#define DRAIN_COUNTS(NAME, C_T)                                                                            \
DC_EXPORT int64_t NAME(C_T *counts, int64_t n, int32_t *ids_out, int64_t *counts_out)                     \
{                                                                                                          \
    int64_t k = 0;                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                                      \
        const C_T c = counts[i];                                                                           \
        if (c != 0) { ids_out[k] = (int32_t)i; counts_out[k] = (int64_t)c; counts[i] = 0; k++; }           \
    }                                                                                                      \
    return k;                                                                                              \
}
DRAIN_COUNTS(dc_drain_counts_c32, int32_t)
DRAIN_COUNTS(dc_drain_counts_c64, int64_t)

/* out[i] = true values among flags[:i] (``out`` has n + 1 elements). */
#define PREFIX_COUNT(NAME, P_T)                                                                            \
DC_EXPORT void NAME(const uint8_t *flags, int64_t n, P_T *out)                                            \
{                                                                                                          \
    P_T s = 0;                                                                                             \
    out[0] = 0;                                                                                            \
    for (int64_t i = 0; i < n; i++) { s += flags[i]; out[i + 1] = s; }                                     \
}
PREFIX_COUNT(dc_prefix_count_p32, int32_t)
PREFIX_COUNT(dc_prefix_count_p64, int64_t)

/* The row hash sum H = sum_j (2 id_j + mask_j) r^j (mod 2^64) over positions j of a row, as
 * four interleaved lanes: lane l sums the positions j = l (mod 4) with powers of r^4, and the
 * row's H is lane0 + r lane1 + r^2 lane2 + r^3 lane3. One running power per four tokens keeps
 * the multiply chain (the loop's latency bound) a quarter as long; the sum is the same. */
#define HASH_ROWS(NAME, ID_T)                                                                              \
DC_EXPORT void NAME(const ID_T *ids, const uint8_t *mask, int32_t has_mask, const int64_t *offsets,       \
                    int64_t n_rows, uint64_t r, uint64_t *out)                                             \
{                                                                                                          \
    const uint64_t r2 = r * r, r3 = r2 * r, r4 = r2 * r2;                                                  \
    for (int64_t row = 0; row < n_rows; row++) {                                                           \
        const int64_t a = offsets[row], b = offsets[row + 1];                                              \
        uint64_t h0 = 0, h1 = 0, h2 = 0, h3 = 0, p = 1;                                                    \
        int64_t j = a;                                                                                     \
        if (has_mask) {                                                                                    \
            for (; j + 4 <= b; j += 4) {                                                                   \
                h0 += (2u * (uint64_t)(int64_t)ids[j] + mask[j]) * p;                                      \
                h1 += (2u * (uint64_t)(int64_t)ids[j + 1] + mask[j + 1]) * p;                              \
                h2 += (2u * (uint64_t)(int64_t)ids[j + 2] + mask[j + 2]) * p;                              \
                h3 += (2u * (uint64_t)(int64_t)ids[j + 3] + mask[j + 3]) * p;                              \
                p *= r4;                                                                                   \
            }                                                                                              \
            uint64_t q = p;                                                                                \
            for (; j < b; j++) { h0 += (2u * (uint64_t)(int64_t)ids[j] + mask[j]) * q; q *= r; }           \
        } else {                                                                                           \
            for (; j + 4 <= b; j += 4) {                                                                   \
                h0 += 2u * (uint64_t)(int64_t)ids[j] * p;                                                  \
                h1 += 2u * (uint64_t)(int64_t)ids[j + 1] * p;                                              \
                h2 += 2u * (uint64_t)(int64_t)ids[j + 2] * p;                                              \
                h3 += 2u * (uint64_t)(int64_t)ids[j + 3] * p;                                              \
                p *= r4;                                                                                   \
            }                                                                                              \
            uint64_t q = p;                                                                                \
            for (; j < b; j++) { h0 += 2u * (uint64_t)(int64_t)ids[j] * q; q *= r; }                       \
        }                                                                                                  \
        out[row] = h0 + r * h1 + r2 * h2 + r3 * h3;                                                        \
    }                                                                                                      \
}
HASH_ROWS(dc_row_hash_sums_i32, int32_t)
HASH_ROWS(dc_row_hash_sums_i64, int64_t)

/* One pass for a shard's share of every token: the supervised prefix sum, the supervised-id counts
 * (counts[t] += 1 for each supervised t in [0, limit); other ids are ids_known's), the row hash
 * sums of HASH_ROWS (with a mask) and, in ``outside``, how many ids are outside [0, limit) (the
 * same comparison the counts make). ``offsets`` must run from 0 to the number of tokens. */
#define TOKEN_PASS(NAME, ID_T, P_T)                                                                        \
DC_EXPORT void NAME(const ID_T *ids, const uint8_t *mask, const int64_t *offsets, int64_t n_rows,          \
                    uint64_t r, int64_t limit, P_T *prefix, P_T *counts, uint64_t *sums, int64_t *outside) \
{                                                                                                          \
    const uint64_t r2 = r * r, r3 = r2 * r, r4 = r2 * r2;                                                  \
    P_T s = 0;                                                                                             \
    int64_t n_out = 0;                                                                                     \
    prefix[0] = 0;                                                                                         \
    for (int64_t row = 0; row < n_rows; row++) {                                                           \
        const int64_t a = offsets[row], b = offsets[row + 1];                                              \
        uint64_t h[4] = {0, 0, 0, 0}, p = 1;                                                               \
        int64_t j = a;                                                                                     \
        for (; j + 4 <= b; j += 4) {                                                                       \
            for (int l = 0; l < 4; l++) {                                                                  \
                const int64_t t = (int64_t)ids[j + l];                                                     \
                const uint8_t m = mask[j + l];                                                             \
                s += m;                                                                                    \
                prefix[j + l + 1] = s;                                                                     \
                h[l] += (2u * (uint64_t)t + m) * p;                                                        \
                const int in = (uint64_t)t < (uint64_t)limit;                                              \
                n_out += !in;                                                                              \
                if (m && in) counts[t] += 1;                                                               \
            }                                                                                              \
            p *= r4;                                                                                       \
        }                                                                                                  \
        for (; j < b; j++) {                                                                               \
            const int64_t t = (int64_t)ids[j];                                                             \
            const uint8_t m = mask[j];                                                                     \
            s += m;                                                                                        \
            prefix[j + 1] = s;                                                                             \
            h[0] += (2u * (uint64_t)t + m) * p;                                                            \
            p *= r;                                                                                        \
            const int in = (uint64_t)t < (uint64_t)limit;                                                  \
            n_out += !in;                                                                                  \
            if (m && in) counts[t] += 1;                                                                   \
        }                                                                                                  \
        sums[row] = h[0] + r * h[1] + r2 * h[2] + r3 * h[3];                                               \
    }                                                                                                      \
    *outside = n_out;                                                                                      \
}
TOKEN_PASS(dc_token_pass_i32_p32, int32_t, int32_t)
TOKEN_PASS(dc_token_pass_i64_p32, int64_t, int32_t)
TOKEN_PASS(dc_token_pass_i32_p64, int32_t, int64_t)
TOKEN_PASS(dc_token_pass_i64_p64, int64_t, int64_t)

/* out[i]: reply-text tokens in [t_start[i], t_end[i]), exact up to ``cap``, else cap + 1. A text
 * token has a role in ``is_part``, is no boundary token, no ``blank`` id (ids clipped into the
 * table) and no marker. Each turn is read only until its count passes ``cap``. */
#define REPLY_LENGTHS(NAME, ID_T)                                                                          \
DC_EXPORT void NAME(const ID_T *ids, const uint8_t *role, const uint8_t *boundary, const uint8_t *is_part,\
                    const uint8_t *blank, int64_t n_blank, const int64_t *markers, int64_t n_markers,      \
                    const int64_t *t_start, const int64_t *t_end, int64_t n_turns, int64_t cap, int64_t *out)\
{                                                                                                          \
    const int64_t hi = n_blank - 1;                                                                        \
    for (int64_t i = 0; i < n_turns; i++) {                                                                \
        int64_t c = 0;                                                                                     \
        for (int64_t p = t_start[i]; p < t_end[i]; p++) {                                                  \
            if (!is_part[role[p]] || boundary[p]) continue;                                                \
            const int64_t t = (int64_t)ids[p];                                                             \
            if (blank[clip(t, hi)]) continue;                                                              \
            int marker = 0;                                                                                \
            for (int64_t k = 0; k < n_markers; k++) marker |= t == markers[k];                             \
            if (marker) continue;                                                                          \
            if (++c > cap) break;                                                                          \
        }                                                                                                  \
        out[i] = c;                                                                                        \
    }                                                                                                      \
}
REPLY_LENGTHS(dc_reply_lengths_i32, int32_t)
REPLY_LENGTHS(dc_reply_lengths_i64, int64_t)

/* The assistant turns of a shard from its role runs: a turn is a maximal sequence of runs whose
 * role ``is_turn``, never crossing a row start (``row_first``). Writes each turn's first position,
 * one past its last, and whether it holds an ASSISTANT_END run; returns the number of turns. */
DC_EXPORT int64_t dc_assistant_turns(const uint8_t *role, const int64_t *start, const int64_t *end,
                                     const uint8_t *row_first, int64_t n_runs, const uint8_t *is_turn,
                                     int64_t *turn_start, int64_t *turn_end, uint8_t *closed)
{
    int64_t nt = 0;
    int open = 0;
    for (int64_t k = 0; k < n_runs; k++) {
        if (!is_turn[role[k]]) { open = 0; continue; }
        if (!open || row_first[k]) { turn_start[nt] = start[k]; closed[nt] = 0; nt++; open = 1; }
        turn_end[nt - 1] = end[k];
        if (role[k] == ASSISTANT_END) closed[nt - 1] = 1;
    }
    return nt;
}

/* Per code: the length of its runs [start, end) and, with a prefix sum, the flags under them. */
#define RUN_TOTALS(NAME, P_T)                                                                              \
DC_EXPORT void NAME(const uint8_t *role, const int64_t *start, const int64_t *end, int64_t n_runs,        \
                    const P_T *prefix, int32_t has_prefix, int64_t *counts, int64_t *sums)                 \
{                                                                                                          \
    for (int64_t k = 0; k < n_runs; k++) {                                                                 \
        const uint8_t c = role[k];                                                                         \
        counts[c] += end[k] - start[k];                                                                    \
        if (has_prefix) sums[c] += (int64_t)prefix[end[k]] - (int64_t)prefix[start[k]];                    \
    }                                                                                                      \
}
RUN_TOTALS(dc_run_totals_p32, int32_t)
RUN_TOTALS(dc_run_totals_p64, int64_t)

/* setuptools builds this file as an extension module; some linkers insist on its init symbol.
 * kernels.py never imports the library as a module, it opens it with ctypes. */
DC_EXPORT void *PyInit__kernels(void) { return NULL; }
