/* The span labeller for any template profile, one pass over a shard's flattened ids.
 *
 * spans/generic.py's ``label`` is the specification (numpy, vectorized over the shard); this is
 * the same rules read token by token, and tests/test_spans_generic.py holds the two to identical
 * outputs. The profile arrives as lookup tables (spans/kernel.py builds them from a
 * CompiledProfile): per id a kind bitmask; header specs longest core first, listed per opener;
 * which end ids each spec accepts; sub-spans, and per body role the sub-spans it may hold.
 *
 * Where the time goes on a passing shard, and what keeps it small:
 * - a run of ordinary tokens inside a turn body or between turns shares one role and problem and is
 *   written as a block; its end is found 64 bytes of ids at a time (scan_run_*: vector compares
 *   against the smallest id that can end a run, SSE2 on x86-64), so most tokens cost a fraction of
 *   a comparison and no table lookup;
 * - the tokens of a header after its opener, and the token after a turn's end (a template's
 *   newline), the two places every turn passes through, take short paths of their own;
 * - everything else (markers, pending problems, row ends) takes the full rules.
 * ChatML shards label faster this way than with the ChatML-only kernel this replaced
 * (benchmarks/labellers.py, docs/benchmarks.md).
 *
 * Built into the same library as _kernels.c (one ABI version, dc_abi_version, for both).
 * Plain C99 (with GCC/clang vector intrinsics where available), no Python headers. Ids are int32
 * or int64 (the _i32/_i64 suffix), read as they are (never widened); ids outside [0, n_ids) are
 * ordinary tokens to every rule.
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
    const int64_t *inside_after;  /* [n_specs + 1] ... only once this sub-span closed in it (-1: anywhere) */
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
    const uint32_t *body_subs;    /* [256] by body role: bit k set when sub-span k may open in such a body */
    const uint8_t *plain;         /* [(n_specs + 1) * n_end_codes] end ids that are ordinary text in the turn */
    const uint8_t *ends_row;      /* [n_specs + 1] a row may end right after the header, its turn empty */
} dc_profile;

static inline uint8_t kind_of(const dc_profile *P, int64_t t) {
    return (t >= 0 && t < P->n_ids) ? P->kind[t] : 0;
}

/* ``n`` bytes of ``v`` at ``dst``: short runs (most runs between markers are a few words) with two
 * overlapping stores instead of a call to memset. */
static inline void fill(uint8_t *dst, int v, int64_t n) {
    if (n >= 16) { memset(dst, v, (size_t)n); return; }
    const uint64_t w = 0x0101010101010101ull * (uint8_t)v;
    if (n >= 8) { memcpy(dst, &w, 8); memcpy(dst + n - 8, &w, 8); return; }
    if (n >= 4) { const uint32_t x = (uint32_t)w; memcpy(dst, &x, 4); memcpy(dst + n - 4, &x, 4); return; }
    for (int64_t i = 0; i < n; i++) dst[i] = (uint8_t)v;
}

/* A bit per id of a 64-byte block (16 int32 or 8 int64 ids) that may end a run of ordinary tokens:
 * every id at or above ``lo``, the smallest id with a K_STOP bit, has its bit set; ids below it in
 * [0, lo) never do. (Bits for other ids do no harm: each candidate is looked up in the kind table.)
 * On x86-64 with GCC or clang a block is four vector subtractions and their sign bits (SSE2, which
 * every x86-64 has): id - lo is negative exactly for the ids in [0, lo), as for the negative ids,
 * which are ordinary too. Elsewhere, a loop without branches. */
#if defined(__GNUC__) && defined(__SSE2__)
#include <emmintrin.h>
static inline unsigned block_mask_i32(const int32_t *x, int64_t lo) {
    const __m128i L = _mm_set1_epi32((int32_t)lo);
    __m128i a, b, c, d;
    memcpy(&a, x, 16); memcpy(&b, x + 4, 16); memcpy(&c, x + 8, 16); memcpy(&d, x + 12, 16);
    a = _mm_sub_epi32(a, L); b = _mm_sub_epi32(b, L); c = _mm_sub_epi32(c, L); d = _mm_sub_epi32(d, L);
    if (_mm_movemask_ps(_mm_castsi128_ps(_mm_and_si128(_mm_and_si128(a, b), _mm_and_si128(c, d)))) == 0xF)
        return 0; /* the common case: every id below lo, one test */
    return ~((unsigned)_mm_movemask_ps(_mm_castsi128_ps(a)) | (unsigned)_mm_movemask_ps(_mm_castsi128_ps(b)) << 4 |
             (unsigned)_mm_movemask_ps(_mm_castsi128_ps(c)) << 8 | (unsigned)_mm_movemask_ps(_mm_castsi128_ps(d)) << 12)
           & 0xFFFFu;
}
static inline unsigned block_mask_i64(const int64_t *x, int64_t lo) {
    const __m128i L = _mm_set1_epi64x(lo);
    __m128i a, b, c, d;
    memcpy(&a, x, 16); memcpy(&b, x + 2, 16); memcpy(&c, x + 4, 16); memcpy(&d, x + 6, 16);
    a = _mm_sub_epi64(a, L); b = _mm_sub_epi64(b, L); c = _mm_sub_epi64(c, L); d = _mm_sub_epi64(d, L);
    if (_mm_movemask_pd(_mm_castsi128_pd(_mm_and_si128(_mm_and_si128(a, b), _mm_and_si128(c, d)))) == 0x3)
        return 0;
    return ~((unsigned)_mm_movemask_pd(_mm_castsi128_pd(a)) | (unsigned)_mm_movemask_pd(_mm_castsi128_pd(b)) << 2 |
             (unsigned)_mm_movemask_pd(_mm_castsi128_pd(c)) << 4 | (unsigned)_mm_movemask_pd(_mm_castsi128_pd(d)) << 6)
           & 0xFFu;
}
#define DC_CTZ(m) __builtin_ctz(m)
#else
static inline unsigned block_mask_i32(const int32_t *x, int64_t lo) {
    unsigned m = 0;
    for (int k = 0; k < 16; k++) m |= (unsigned)((uint32_t)x[k] >= (uint64_t)lo) << k;
    return m;
}
static inline unsigned block_mask_i64(const int64_t *x, int64_t lo) {
    unsigned m = 0;
    for (int k = 0; k < 8; k++) m |= (unsigned)((uint64_t)x[k] >= (uint64_t)lo) << k;
    return m;
}
static inline int dc_ctz(unsigned m) { int k = 0; while (!(m & 1u)) { m >>= 1; k++; } return k; }
#define DC_CTZ(m) dc_ctz(m)
#endif

/* The first position in [q, lim) whose id ends a run of ordinary tokens (an id with a K_STOP bit),
 * or lim. Every id in [0, lowest_stop) is ordinary, and so is every negative id or one past the
 * tables, so one comparison rules out nearly every token: a block at a time (block_mask_*), and
 * only its candidates are looked up in the kind table. ``MAX_LO``: the largest lowest_stop the
 * block test takes (for int32 ids, INT32_MAX; a larger one leaves the ids to the plain loop). */
#define SCAN_RUN(NAME, ID_T, U_T, BLOCK, MASK, MAX_LO)                                                     \
static inline int64_t NAME(const dc_profile *P, const ID_T *ids, int64_t q, int64_t lim) {                \
    const int64_t lo = P->lowest_stop;                                                                     \
    for (; lo <= MAX_LO && q + BLOCK <= lim; q += BLOCK) {                                                 \
        for (unsigned m = MASK(ids + q, lo); m; m &= m - 1) {                                              \
            const int64_t at = q + DC_CTZ(m);                                                              \
            if (kind_of(P, (int64_t)ids[at]) & K_STOP) return at;                                          \
        }                                                                                                  \
    }                                                                                                      \
    for (; q < lim; q++)                                                                                   \
        if ((uint64_t)(U_T)ids[q] >= (uint64_t)lo && (kind_of(P, (int64_t)ids[q]) & K_STOP)) return q;     \
    return lim;                                                                                            \
}
SCAN_RUN(scan_run_i32, int32_t, uint32_t, 16, block_mask_i32, INT32_MAX)
SCAN_RUN(scan_run_i64, int64_t, uint64_t, 8, block_mask_i64, INT64_MAX)

#define LABEL_PROFILE(NAME, ID_T, SCAN)                                                                        \
DC_EXPORT int64_t NAME(const ID_T *ids, const int64_t *offsets, int64_t n_rows, const dc_profile *P,         \
                       int64_t max_len, uint8_t *role, uint8_t *boundary, uint8_t *problem, int64_t *run_start,  \
                       uint8_t *run_role, uint8_t *run_row_first, int64_t *boundary_at, int64_t *noted)      \
{                                                                                                          \
    int64_t k_runs = 0, k_bd = 0, k_prob = 0;                                                              \
    const int64_t n_subs = P->n_subs < MAX_SUBS ? P->n_subs : MAX_SUBS;                                    \
    int any_stops = 0;                                                                                     \
    for (int64_t k = 0; k < n_subs; k++) any_stops |= P->sub_stops[k] != 0;                                \
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
        uint32_t body_subs = 0; /* the sub-spans the open turn's body may hold, set at its opener */       \
        for (int64_t k = 0; k < n_subs; k++) { sub_last_open[k] = -1; sub_last_close[k] = -1; }            \
        int current = -1;                                                                                  \
        int prev_stage = -1; /* the previous token's role after sub-spans, before end-marker rules */    \
        int64_t p = a;                                                                                     \
        while (p < b) {                                                                                    \
            const int64_t t = (int64_t)ids[p];                                                             \
            const uint8_t kd = kind_of(P, t);                                                              \
            /* --- header tokens of the open turn, no marker among them: the header's role, nothing else */ \
            if (p <= hdr_end && last_e < last_s && !(kd & (K_OPENER | K_END | K_SUB)) && p != pend_a &&    \
                p != pend_q && p != b - 1) {                                                               \
                const int hr = turn_role == L_ASSISTANT ? L_ASSISTANT_HEADER : L_HEADER;                   \
                const int64_t stop = hdr_end < b - 2 ? hdr_end : b - 2;                                    \
                for (;;) {                                                                                 \
                    const int rl = (free_rl && p >= free_lo && p < free_hi) ? free_rl : hr;                \
                    if (rl != current) {                                                                   \
                        run_start[k_runs] = p; run_role[k_runs] = (uint8_t)rl; run_row_first[k_runs] = 0;  \
                        k_runs++; current = rl;                                                            \
                    }                                                                                      \
                    role[p] = (uint8_t)rl; boundary[p] = 0; problem[p] = 0;                                \
                    prev_stage = rl;                                                                       \
                    p++;                                                                                   \
                    if (p > stop || p == pend_a || p == pend_q ||                                          \
                        (kind_of(P, (int64_t)ids[p]) & (K_OPENER | K_END | K_SUB)))                        \
                        break;                                                                             \
                }                                                                                          \
                continue;                                                                                  \
            }                                                                                              \
            /* --- the token right after an accepted end: what a template writes there, or text outside */ \
            if (p == prev_end_tok + 1 && last_e == p - 1 && !(kd & (K_OPENER | K_END | K_SUB)) &&          \
                p != pend_a && p != pend_q && p != b - 1) {                                                \
                const int after = (kd & (K_AFTER | K_EOS)) != 0;                                           \
                const int rl = after && turn_role == L_ASSISTANT ? L_AFTER_ASSISTANT_END : L_OUTSIDE;      \
                const int pb = after ? 0 : P_TEXT_OUTSIDE_TURN;                                            \
                if (rl != current) {                                                                       \
                    run_start[k_runs] = p; run_role[k_runs] = (uint8_t)rl; run_row_first[k_runs] = 0;      \
                    k_runs++; current = rl;                                                                \
                }                                                                                          \
                role[p] = (uint8_t)rl; boundary[p] = 0; problem[p] = (uint8_t)pb;                          \
                k_prob += pb != 0;                                                                         \
                prev_stage = L_OUTSIDE;                                                                    \
                p++;                                                                                       \
                continue;                                                                                  \
            }                                                                                              \
            /* --- a run of ordinary tokens away from every position a rule singles out */                 \
            if (!(kd & K_STOP) && p != a && p != b - 1 && p > hdr_end && p != pend_a && p != pend_q &&    \
                p != prev_end_tok + 1) {                                                                   \
                int64_t q = p + 1;                                                                         \
                /* pend_a and pend_q lie at most one past the header, behind p: no check inside the run */ \
                q = SCAN(P, ids, q, b - 1);                                                               \
                int rl = L_OUTSIDE, pb = 0;                                                                \
                if (last_s >= 0) {                                                                         \
                    if (last_e >= last_s) {                                                                \
                        pb = P_TEXT_OUTSIDE_TURN;                                                          \
                    } else {                                                                               \
                        rl = turn_body;                                                                    \
                        if (turn_role == L_OUTSIDE) pb = P_TEXT_OUTSIDE_TURN;                              \
                        else {                                                                             \
                            for (uint32_t m = body_subs; m; m &= m - 1) {                                  \
                                const int k = DC_CTZ(m);                                                   \
                                if (sub_last_open[k] > last_s &&                                           \
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
                fill(role + p, rl, q - p);                                                                 \
                prev_stage = rl;                                                                           \
                fill(boundary + p, 0, q - p);                                                              \
                fill(problem + p, pb, q - p);                                                              \
                if (pb) k_prob += q - p;                                                                   \
                p = q;                                                                                     \
                continue;                                                                                  \
            }                                                                                              \
            const int is_s = (kd & K_OPENER) != 0;                                                         \
            int is_e = (kd & K_END) != 0;                                                                  \
            int prob = 0, bd = 0, stray = 0, nested = 0, closes_assistant = 0, plain = 0;                  \
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
                    if (L > 1) { /* the second id decides between most specs: test it first */             \
                        if (p + 1 >= b) { cut = 1; continue; }                                             \
                        if ((int64_t)ids[p + 1] != core[1]) continue;                                      \
                    }                                                                                      \
                    int alive = 1;                                                                         \
                    for (int64_t jj = 2; jj < L && alive; jj++) {                                          \
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
                    const int64_t k = P->inside_after[spec];                                               \
                    const int reopens = P->inside[spec * 256 + P->role[prev_spec]]                         \
                        && (k < 0 || (sub_last_close[k] > prev_m && sub_last_close[k] > sub_last_open[k])); \
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
                body_subs = P->body_subs[turn_body];                                                       \
                last_s = p; s_spec = spec; hdr_end = p + hlen - 1;                                         \
                if (P->is_bos[spec] && p != a) prob = P_MISPLACED_BOS;                                     \
                prev_m = p; prev_is_s = 1; prev_accepted = 0; prev_spec = spec;                            \
            } else if (is_e && prev_is_s && P->plain[prev_spec * P->n_end_codes + P->end_code[t]]) {       \
                is_e = 0; plain = 1; /* ordinary text of the open turn: no marker, the previous one stays */ \
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
                        for (uint32_t m = body_subs; m; m &= m - 1) {                                      \
                            const int k = DC_CTZ(m);                                                       \
                            if (sub_last_open[k] > last_s &&                                               \
                                (P->sub_close[k] < 0 || sub_last_open[k] > sub_last_close[k] ||            \
                                 t == P->sub_close[k]))                                                    \
                                rl = P->sub_role[k];                                                       \
                        }                                                                                  \
                        /* a stop token: a block's opener right after the assistant's own output */       \
                        for (int64_t k = 0; any_stops && (kd & K_SUB) && k < n_subs; k++) {                \
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
            if ((kd & K_END) && !plain) prev_end_tok = p; /* a plain end id is text */                      \
            /* --- row level */                                                                            \
            if (p == a && !is_s) prob = P_NO_LEADING_HEADER;                                               \
            if (p == b - 1 && open_tok && P->needs_end[s_spec] && b - a < max_len && prob == 0 &&          \
                rl != L_ASSISTANT_END && !(P->ends_row[s_spec] && p == hdr_end))                           \
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
LABEL_PROFILE(dc_label_profile_i32, int32_t, scan_run_i32)
LABEL_PROFILE(dc_label_profile_i64, int64_t, scan_run_i64)
