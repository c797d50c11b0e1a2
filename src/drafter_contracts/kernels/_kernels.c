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

/* The one role code these loops read (assistant_turns); kernels.py exports it and
 * tests/test_kernels.py checks it against spans/labels.py. The labeller's codes are in _labeller.c. */
enum { ASSISTANT_END = 8 };

DC_EXPORT int32_t dc_abi_version(void) { return 9; }

static inline int64_t clip(int64_t v, int64_t hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

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
