/* The span labeller for any template profile, one pass over a shard's flattened ids.
 *
 * spans/generic.py's ``label`` is the specification (numpy, vectorized over the shard); this is
 * the same rules read token by token, and tests/test_labeller_kernel.py holds the two to identical
 * outputs. The profile arrives as lookup tables (spans/kernel.py builds them from a
 * CompiledProfile): per id a kind bitmask; header specs longest core first, listed per opener;
 * which end ids each spec accepts; sub-spans. A run of ordinary tokens (kind 0) inside a turn body
 * or between turns shares one role and problem and is written as a block, so the cost per token
 * of a passing shard is one table lookup.
 *
 * Built into the same library as _kernels.c (one ABI version, dc_abi_version, for both).
 * Plain C99, no Python headers. Ids are int32 or int64 (the _i32/_i64 suffix); ids outside
 * [0, n_ids) are ordinary tokens to every rule.
 */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(_WIN32)
#define DC_EXPORT __declspec(dllexport)
#else
#define DC_EXPORT __attribute__((visibility("default")))
#endif

/* Role and TurnProblem codes (spans/labels.py; tests check that spans/kernel.py mirrors them). */
enum { L_OUTSIDE = 0, L_HEADER = 1, L_ASSISTANT = 5, L_ASSISTANT_END = 8, L_END = 9,
       L_AFTER_ASSISTANT_END = 10, L_INJECTED = 11, L_UNKNOWN_ROLE = 12, L_ASSISTANT_HEADER = 13 };
enum { P_NO_LEADING_HEADER = 1, P_HEADER_IN_OPEN_TURN = 2, P_STRAY_END = 3, P_UNKNOWN_ROLE = 4,
       P_MALFORMED_HEADER = 5, P_TEXT_OUTSIDE_TURN = 6, P_UNCLOSED_TURN = 7, P_MISPLACED_BOS = 8 };
/* kind bits per id */
enum { K_OPENER = 1, K_END = 2, K_SUB = 4, K_AFTER = 8, K_EOS = 16, K_MERGES = 32 };
/* ids that end a run of ordinary tokens (the others matter only right after a header or an end) */
#define K_STOP (K_OPENER | K_END | K_SUB | K_EOS)

#define MAX_SUBS 16

/* A profile as tables. Spec index 0 is "unknown role"; specs 1..n_specs are the profile's headers in
 * matching order (longest core first). Per-spec arrays have n_specs + 1 entries. */
typedef struct {
    int64_t n_ids;                /* size of the per-id tables */
    int64_t lowest_stop;          /* the smallest id with a K_STOP bit: every id in [0, lowest_stop) is ordinary */
    const uint8_t *kind;          /* [n_ids] K_* bits */
    const int32_t *opener_index;  /* [n_ids] index of an opener id among openers, -1 otherwise */
    const uint8_t *end_code;      /* [n_ids] code of an end id (column of accepts) */
    int64_t n_end_codes;
    int64_t n_specs;
    const int64_t *core_start;    /* [n_specs + 1] offset of the spec's core in core_ids */
    const int64_t *core_len;      /* [n_specs + 1] */
    const int64_t *core_ids;
    const int64_t *until;         /* [n_specs + 1] -1: no until */
    const int64_t *tail;          /* [n_specs + 1] -1: no tail */
    const uint8_t *tail_merges;   /* [n_specs + 1] */
    const uint8_t *role;          /* [n_specs + 1] */
    const uint8_t *body;          /* [n_specs + 1] */
    const uint8_t *needs_end;     /* [n_specs + 1] */
    const uint8_t *closed_by_next;/* [n_specs + 1] */
    const uint8_t *is_bos;        /* [n_specs + 1] */
    const uint8_t *inside;        /* [(n_specs + 1) * 256] may open inside an open turn of that role */
    const uint8_t *free_role;     /* [n_specs + 1] role of the tokens between core and until (0: header) */
    const uint8_t *accepts;       /* [(n_specs + 1) * n_end_codes] */
    const int64_t *opener_specs_start; /* [n_openers + 1] specs of each opener, in matching order */
    const int64_t *opener_specs;
    const int64_t *unknown_len;   /* [n_openers] */
    const int64_t *unknown_tail;  /* [n_openers] -1: none */
    const uint8_t *unknown_tail_merges; /* [n_openers] */
    const int64_t *unknown_until; /* [n_openers] -1: none */
    int64_t n_subs;
    const int64_t *sub_open;      /* [n_subs] */
    const int64_t *sub_close;     /* [n_subs] -1: to the end of the turn */
    const uint8_t *sub_role;      /* [n_subs] */
    const uint8_t *sub_within;    /* [n_subs * 256] */
    const uint8_t *sub_stops;     /* [n_subs] the opener right after assistant output is the turn's end token */
} dc_profile;

static inline uint8_t kind_of(const dc_profile *P, int64_t t) {
    return (t >= 0 && t < P->n_ids) ? P->kind[t] : 0;
}

/* Whether an id ends a run of ordinary tokens: one comparison for the common case. */
static inline int ends_run(const dc_profile *P, int64_t t) {
    if (t >= 0 && t < P->lowest_stop) return 0;
    return (kind_of(P, t) & K_STOP) != 0;
}

#define LABEL_PROFILE(NAME, ID_T)                                                                          \
DC_EXPORT int64_t NAME(const ID_T *ids, const int64_t *offsets, int64_t n_rows, const dc_profile *P,         \
                       int64_t max_len, uint8_t *role, uint8_t *boundary, uint8_t *problem, int64_t *run_start,  \
                       uint8_t *run_role, uint8_t *run_row_first, int64_t *boundary_at, int64_t *noted)      \
{                                                                                                          \
    int64_t k_runs = 0, k_bd = 0, k_prob = 0;                                                              \
    const int64_t n_subs = P->n_subs < MAX_SUBS ? P->n_subs : MAX_SUBS;                                    \
    for (int64_t r = 0; r < n_rows; r++) {                                                                 \
        const int64_t a = offsets[r], b = offsets[r + 1];                                                  \
        /* the open turn: its opener, spec, roles, header length (tail included) */                       \
        int64_t last_s = -1, last_e = -1, s_spec = 0, hdr_end = -1, free_lo = 0, free_hi = 0;         \
        int free_rl = 0;                                                                                   \
        int turn_role = L_OUTSIDE, turn_body = L_OUTSIDE;                                                  \
        /* problems decided at the opener for later positions */                                          \
        int64_t pend_a = -1, pend_q = -1;                                                                  \
        int pend_a_prob = 0, pend_q_kind = 0; /* at pend_q: 1 boundary token, 2 malformed header */       \
        /* the previous marker (opener or end, strays included) of the row */                             \
        int64_t prev_m = -1; int prev_is_s = 0, prev_accepted = 0; int64_t prev_spec = 0;                  \
        int64_t prev_end_tok = -2; /* position of the last end-kind marker token (any) */                 \
        int64_t sub_last_open[MAX_SUBS], sub_last_close[MAX_SUBS];                                         \
        for (int64_t k = 0; k < n_subs; k++) { sub_last_open[k] = -1; sub_last_close[k] = -1; }            \
        int current = -1;                                                                                  \
        int prev_stage = -1; /* the previous token's role after sub-spans, before end-marker rules */    \
        int64_t p = a;                                                                                     \
        while (p < b) {                                                                                    \
            const int64_t t = (int64_t)ids[p];                                                             \
            const uint8_t kd = kind_of(P, t);                                                              \
            /* --- a run of ordinary tokens away from every position a rule singles out */               \
            if (!(kd & K_STOP) && p != a && p != b - 1 && p > hdr_end && p != pend_a && p != pend_q &&    \
                p != prev_end_tok + 1) {                                                                   \
                int64_t q = p + 1;                                                                         \
                while (q < b - 1 && !ends_run(P, (int64_t)ids[q]) && q != pend_a && q != pend_q) q++;         \
                int rl = L_OUTSIDE, pb = 0;                                                                \
                if (last_s >= 0) {                                                                         \
                    if (last_e >= last_s) {                                                                \
                        pb = P_TEXT_OUTSIDE_TURN;                                                          \
                    } else {                                                                               \
                        rl = turn_body;                                                                    \
                        if (turn_role == L_OUTSIDE) pb = P_TEXT_OUTSIDE_TURN;                              \
                        else {                                                                             \
                            const int base = rl;                                                           \
                            for (int64_t k = 0; k < n_subs; k++) {                                         \
                                if (P->sub_within[k * 256 + base] && sub_last_open[k] > last_s &&          \
                                    (P->sub_close[k] < 0 || sub_last_open[k] > sub_last_close[k]))         \
                                    rl = P->sub_role[k];                                                   \
                            }                                                                              \
                        }                                                                                  \
                        if (pb) rl = L_OUTSIDE;                                                            \
                    }                                                                                      \
                }                                                                                          \
                if (rl != current) {                                                                       \
                    run_start[k_runs] = p; run_role[k_runs] = (uint8_t)rl; run_row_first[k_runs] = 0;      \
                    k_runs++; current = rl;                                                                \
                }                                                                                          \
                memset(role + p, rl, (size_t)(q - p));                                                     \
                prev_stage = rl;                                                                           \
                memset(boundary + p, 0, (size_t)(q - p));                                                  \
                memset(problem + p, pb, (size_t)(q - p));                                                  \
                if (pb) k_prob += q - p;                                                                   \
                p = q;                                                                                     \
                continue;                                                                                  \
            }                                                                                              \
            const int is_s = (kd & K_OPENER) != 0;                                                         \
            int is_e = (kd & K_END) != 0;                                                                  \
            int prob = 0, bd = 0, stray = 0, nested = 0, closes_assistant = 0;                             \
            if (p == pend_a) prob = pend_a_prob;                                                           \
            /* --- markers: a new turn, or an end */                                                      \
            if (is_s) {                                                                                    \
                /* the next marker after p in the row (bounded scans: headers are short) */               \
                const int64_t w = P->opener_index[t];                                                      \
                int64_t spec = 0, hlen = 0; int cut = 0;                                                   \
                int64_t next_m = -1; /* computed on demand */                                             \
                for (int64_t j = P->opener_specs_start[w]; j < P->opener_specs_start[w + 1]; j++) {        \
                    const int64_t si = P->opener_specs[j];                                                 \
                    const int64_t L = P->core_len[si];                                                     \
                    const int64_t *core = P->core_ids + P->core_start[si];                                 \
                    int alive = 1;                                                                         \
                    for (int64_t jj = 1; jj < L && alive; jj++) {                                          \
                        if (p + jj >= b) { cut = 1; alive = 0; break; }                                    \
                        if ((int64_t)ids[p + jj] != core[jj]) alive = 0;                                   \
                    }                                                                                      \
                    if (!alive) continue;                                                                  \
                    int64_t length = L;                                                                    \
                    if (P->until[si] >= 0) {                                                               \
                        if (next_m < 0) {                                                                  \
                            next_m = p + 1;                                                                \
                            while (next_m < b && !(kind_of(P, (int64_t)ids[next_m]) & (K_OPENER | K_END))) next_m++; \
                        }                                                                                  \
                        int64_t u = p + L;                                                                 \
                        while (u < next_m && (int64_t)ids[u] != P->until[si]) u++;                         \
                        if (u >= next_m) { if (next_m >= b) cut = 1; continue; }                           \
                        length = u - p + 1;                                                                \
                    }                                                                                      \
                    spec = si; hlen = length; /* until at p + hlen - 1 */                                  \
                    break;                                                                                 \
                }                                                                                          \
                int64_t tail_id; const int64_t until_at = p + hlen - 1; /* the until token, for until specs */ \
                int tail_merges;                                                                           \
                if (spec > 0) {                                                                            \
                    cut = 0;                                                                               \
                    tail_id = P->tail[spec]; tail_merges = P->tail_merges[spec];                           \
                } else {                                                                                   \
                    int64_t ulen = P->unknown_len[w] < b - p ? P->unknown_len[w] : b - p;                  \
                    if (P->unknown_until[w] >= 0) {                                                        \
                        if (next_m < 0) {                                                                  \
                            next_m = p + 1;                                                                \
                            while (next_m < b && !(kind_of(P, (int64_t)ids[next_m]) & (K_OPENER | K_END))) next_m++; \
                        }                                                                                  \
                        int64_t u = p + 1;                                                                 \
                        while (u < next_m && (int64_t)ids[u] != P->unknown_until[w]) u++;                  \
                        if (u < next_m) ulen = u - p + 1;                                                  \
                    }                                                                                      \
                    hlen = ulen;                                                                           \
                    tail_id = P->unknown_tail[w]; tail_merges = P->unknown_tail_merges[w];                 \
                    if (p + 1 < b && !cut) {                                                               \
                        const uint8_t nk = kind_of(P, (int64_t)ids[p + 1]);                                \
                        if (!(nk & (K_OPENER | K_END))) { pend_a = p + 1; pend_a_prob = P_UNKNOWN_ROLE; } \
                        else if (nk & K_END) { pend_a = p + 1; pend_a_prob = P_MALFORMED_HEADER; }       \
                    }                                                                                      \
                }                                                                                          \
                if (cut) hlen = b - p;                                                                     \
                /* nested, or closing an assistant turn that ends at the next header */                  \
                if (prev_is_s) {                                                                           \
                    const int reopens = P->inside[spec * 256 + P->role[prev_spec]];                        \
                    if (P->needs_end[prev_spec] && !reopens) nested = 1;                                   \
                    if (P->closed_by_next[prev_spec]) closes_assistant = 1;                                \
                }                                                                                          \
                if (nested) prob = P_HEADER_IN_OPEN_TURN;                                                  \
                /* the tail */                                                                             \
                const int64_t q = p + hlen;                                                                \
                pend_q = -1; pend_q_kind = 0;                                                              \
                if (tail_id >= 0 && q < b) {                                                               \
                    int marker_before = 0; /* a marker in (p, q) puts q after the next marker */          \
                    for (int64_t x = p + 1; x < q; x++)                                                    \
                        if (kind_of(P, (int64_t)ids[x]) & (K_OPENER | K_END)) { marker_before = 1; break; } \
                    if (!marker_before) {                                                                  \
                        const int64_t tq = (int64_t)ids[q];                                                \
                        const uint8_t kq = kind_of(P, tq);                                                 \
                        if (tq == tail_id) hlen += 1;                                                      \
                        else if (tail_merges && (kq & K_MERGES)) { pend_q = q; pend_q_kind = 1; }          \
                        else if (!nested && !(kq & (K_OPENER | K_END))) { pend_q = q; pend_q_kind = 2; }   \
                    }                                                                                      \
                }                                                                                          \
                free_rl = 0;                                                                               \
                if (spec > 0 && !nested && P->free_role[spec] && P->until[spec] >= 0) {                    \
                    free_rl = P->free_role[spec];                                                          \
                    free_lo = p + P->core_len[spec];                                                       \
                    free_hi = until_at;                                                                    \
                }                                                                                          \
                turn_role = nested ? L_INJECTED : P->role[spec];                                           \
                turn_body = nested ? L_INJECTED : P->body[spec];                                           \
                last_s = p; s_spec = spec; hdr_end = p + hlen - 1;                                         \
                if (P->is_bos[spec] && p != a) prob = P_MISPLACED_BOS;                                     \
                prev_m = p; prev_is_s = 1; prev_accepted = 0; prev_spec = spec;                            \
            } else if (is_e) {                                                                             \
                int accepted = prev_is_s && P->accepts[prev_spec * P->n_end_codes + P->end_code[t]];       \
                int follows = 0;                                                                           \
                if (!accepted && !prev_is_s && prev_accepted && prev_m == p - 1 && (kd & K_AFTER))         \
                    follows = 1;                                                                           \
                if (!accepted && !follows) { stray = 1; prob = P_STRAY_END; }                              \
                if (accepted) last_e = p;                                                                  \
                is_e = accepted;                                                                           \
                prev_m = p; prev_is_s = 0; prev_accepted = accepted;                                       \
            }                                                                                              \
            /* pending problems and boundaries of the open turn's header, at their positions */          \
            if (p == pend_q) {                                                                             \
                if (pend_q_kind == 1) bd = 1;                                                              \
                else if (prob == 0) prob = P_MALFORMED_HEADER;                                             \
            }                                                                                              \
            /* --- sub-span markers seen (every occurrence, as the reference's running maxima) */        \
            if (kd & K_SUB) {                                                                              \
                for (int64_t k = 0; k < n_subs; k++) {                                                     \
                    if (t == P->sub_open[k]) sub_last_open[k] = p;                                         \
                    else if (t == P->sub_close[k]) sub_last_close[k] = p;                                  \
                }                                                                                          \
            }                                                                                              \
            /* --- the role */                                                                             \
            int rl = L_OUTSIDE, stage = L_OUTSIDE; /* stage: after sub-spans, before end-marker rules */  \
            int open_tok = 0, in_header = 0, after = 0;                                                    \
            if (last_s >= 0) {                                                                             \
                const int closed = last_e >= last_s;                                                       \
                if (!closed) {                                                                             \
                    open_tok = 1;                                                                          \
                    rl = turn_body;                                                                        \
                    if (p <= hdr_end) {                                                                    \
                        in_header = 1;                                                                     \
                        rl = turn_role == L_ASSISTANT ? L_ASSISTANT_HEADER : L_HEADER;                     \
                        if (free_rl && p >= free_lo && p < free_hi) rl = free_rl;                          \
                    } else if (!bd) {                                                                      \
                        const int base = rl;                                                               \
                        for (int64_t k = 0; k < n_subs; k++) {                                             \
                            if (P->sub_within[k * 256 + base] && sub_last_open[k] > last_s &&              \
                                (P->sub_close[k] < 0 || sub_last_open[k] > sub_last_close[k] ||            \
                                 t == P->sub_close[k]))                                                    \
                                rl = P->sub_role[k];                                                       \
                        }                                                                                  \
                        /* a stop token: a block's opener right after the assistant's own output */       \
                        for (int64_t k = 0; k < n_subs; k++) {                                             \
                            if (P->sub_stops[k] && t == P->sub_open[k] && rl == P->sub_role[k] && p > a && \
                                (prev_stage == L_ASSISTANT || prev_stage == 6 || prev_stage == 7 ||        \
                                 prev_stage == L_ASSISTANT_HEADER)) {                                      \
                                rl = L_ASSISTANT_END;                                                      \
                                break;                                                                     \
                            }                                                                              \
                        }                                                                                  \
                    }                                                                                      \
                    stage = rl;                                                                            \
                    if (stray) rl = L_OUTSIDE;                                                             \
                    else if (!in_header && turn_role == L_OUTSIDE) {                                       \
                        rl = L_OUTSIDE;                                                                    \
                        if (prob == 0) prob = P_TEXT_OUTSIDE_TURN;                                         \
                    }                                                                                      \
                } else if (is_e) {                                                                         \
                    rl = turn_role == L_ASSISTANT ? L_ASSISTANT_END : L_END;                               \
                } else {                                                                                   \
                    if ((prev_end_tok == p - 1 && (kd & K_AFTER)) || (kd & K_EOS)) after = 1;              \
                    if (after) rl = turn_role == L_ASSISTANT ? L_AFTER_ASSISTANT_END : L_OUTSIDE;          \
                    else if (!stray && prob == 0) prob = P_TEXT_OUTSIDE_TURN;                              \
                }                                                                                          \
            }                                                                                              \
            if (closes_assistant) rl = L_ASSISTANT_END;                                                    \
            if (kd & K_END) prev_end_tok = p;                                                              \
            /* --- row level */                                                                            \
            if (p == a && !is_s) prob = P_NO_LEADING_HEADER;                                               \
            if (p == b - 1 && open_tok && P->needs_end[s_spec] && b - a < max_len && prob == 0 &&          \
                rl != L_ASSISTANT_END)                                                                     \
                prob = P_UNCLOSED_TURN;                                                                    \
            if (rl != current || p == a) {                                                                 \
                run_start[k_runs] = p; run_role[k_runs] = (uint8_t)rl; run_row_first[k_runs] = p == a;     \
                k_runs++; current = rl;                                                                    \
            }                                                                                              \
            role[p] = (uint8_t)rl;                                                                         \
            boundary[p] = (uint8_t)bd;                                                                     \
            problem[p] = (uint8_t)prob;                                                                    \
            if (bd) boundary_at[k_bd++] = p;                                                               \
            k_prob += prob != 0;                                                                           \
            prev_stage = stage;                                                                            \
            p++;                                                                                           \
        }                                                                                                  \
    }                                                                                                      \
    noted[0] = k_bd;                                                                                       \
    noted[1] = k_prob;                                                                                     \
    return k_runs;                                                                                         \
}
LABEL_PROFILE(dc_label_profile_i32, int32_t)
LABEL_PROFILE(dc_label_profile_i64, int64_t)
