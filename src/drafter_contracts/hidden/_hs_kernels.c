/* Per-vector moments of hidden states, read straight from the file's bytes (plain C99, no Python headers).
 *
 * The value pass needs, for every (position, layer) vector of hidden_size values, its sum and its sum of
 * squares: the norms, the zero / constant / non-finite vectors all follow from those two. numpy needs
 * three passes and a float32 copy of the tensor for it (decode, square-sum, sum); this is one pass over
 * the stored bfloat16 or float8 bytes. hidden/moments.py opens it with ctypes and holds it to the numpy
 * formulation (moments_reference); a NaN or infinity propagates into both sums, as it does there.
 * Not strict C99: GCC/clang vector extensions (the build passes -std=c99; both compilers accept them).
 */
#include <stdint.h>
#include <string.h>

#define LANES 16

int64_t hs_abi_version(void) { return 1; }

static inline float bf16_to_float(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* GCC/clang vector extensions (8 floats) instead of intrinsics: SSE2 everywhere, AVX2 where the CPU has it
 * (target_clones picks at load time through an ifunc; the plain build is the fallback). */
typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint32_t v8u32 __attribute__((vector_size(32)));
typedef float v8f __attribute__((vector_size(32)));
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define HS_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define HS_CLONES
#endif

/* x: rows * h bfloat16 values; sum, sumsq: rows outputs. */
HS_CLONES
void hs_bf16_moments(const uint16_t *x, int64_t rows, int64_t h, double *sum, double *sumsq) {
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *v = x + r * h;
        v8f s0 = {0}, q0 = {0}, s1 = {0}, q1 = {0};
        int64_t i = 0;
        for (; i + 16 <= h; i += 16) {
            v8u16 a, b;
            memcpy(&a, v + i, sizeof a);
            memcpy(&b, v + i + 8, sizeof b);
            v8u32 ua = __builtin_convertvector(a, v8u32) << 16, ub = __builtin_convertvector(b, v8u32) << 16;
            v8f fa, fb;
            memcpy(&fa, &ua, sizeof fa);
            memcpy(&fb, &ub, sizeof fb);
            s0 += fa;
            q0 += fa * fa;
            s1 += fb;
            q1 += fb * fb;
        }
        double ts = 0.0, tq = 0.0;
        for (int k = 0; k < 8; k++) {
            ts += (double)s0[k] + (double)s1[k];
            tq += (double)q0[k] + (double)q1[k];
        }
        for (; i < h; i++) {
            float f = bf16_to_float(v[i]);
            ts += f;
            tq += (double)f * f;
        }
        sum[r] = ts;
        sumsq[r] = tq;
    }
}

/* x: rows * h one-byte floats decoded through table (256 float32 values: e4m3fn or e5m2). */
void hs_f8_moments(const uint8_t *x, const float *table, int64_t rows, int64_t h, double *sum, double *sumsq) {
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *v = x + r * h;
        float s[LANES] = {0}, q[LANES] = {0};
        int64_t i = 0;
        for (; i + LANES <= h; i += LANES) {
            for (int k = 0; k < LANES; k++) {
                float f = table[v[i + k]];
                s[k] += f;
                q[k] += f * f;
            }
        }
        double ts = 0.0, tq = 0.0;
        for (int k = 0; k < LANES; k++) {
            ts += s[k];
            tq += q[k];
        }
        for (; i < h; i++) {
            float f = table[v[i]];
            ts += f;
            tq += (double)f * f;
        }
        sum[r] = ts;
        sumsq[r] = tq;
    }
}
