// llama.cpp's single-row products with their weights resident in cache: the reference
// side of `scripts/bench-llama-cpp.py --products`, built there against the ggml of the
// pinned llama-cpp-python and run beside `swactor bench products --formats`.
//
// For each format it makes the same shape as swactor's table (RESIDENT bytes of weights
// per thread, a multiple of 16 rows, COLS columns), places the weights as llama.cpp places
// a model's (the first of the CPU backend's extra buffer types that takes the product, so
// Q4_0 and Q4_K are repacked where llama.cpp repacks them, else the plain CPU buffer),
// and times a graph of NODES products, each of its own f32 activation row, run over and
// over: the best of five timings. Before every run the calling thread writes all NODES
// rows anew, as swactor's side copies its row in before every product and as a decode
// step's norm writes the row a product reads; so on both sides a product's activations
// come fresh from the calling thread's cache, and each quantizes them.
//
// usage: ggml-products THREADS COLS RESIDENT_BYTES MS FORMAT...
// prints one JSON line per format.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#define NODES 16

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int type_named(const char *name) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char *n = ggml_type_name((enum ggml_type)t);
        if (n && strcmp(n, name) == 0 && ggml_type_size((enum ggml_type)t) > 0) {
            return t;
        }
    }
    return -1;
}

// Whether `dev` runs `op` (a product reading `w`) with `w` in a buffer of `buft`: how
// llama.cpp decides where a model's weight goes.
static int takes(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft, struct ggml_tensor *w,
                 struct ggml_tensor *op) {
    ggml_backend_buffer_t probe = ggml_backend_buft_alloc_buffer(buft, 0);
    if (!probe) {
        return 0;
    }
    w->buffer = probe;
    int ok = ggml_backend_dev_supports_op(dev, op);
    w->buffer = NULL;
    ggml_backend_buffer_free(probe);
    return ok;
}

static int measure(ggml_backend_t be, int threads, int cols, size_t resident, double ms,
                   const char *name) {
    int t = type_named(name);
    if (t < 0) {
        fprintf(stderr, "unknown format %s\n", name);
        return 1;
    }
    enum ggml_type type = (enum ggml_type)t;
    size_t row_bytes = ggml_row_size(type, cols);
    // A multiple of 16 rows per thread, as swactor's table has.
    int step = 16 * threads;
    int rows = (int)(resident * (size_t)threads / row_bytes / (size_t)step) * step;
    if (rows < step) {
        rows = step;
    }
    struct ggml_init_params wp = {ggml_tensor_overhead() * 2, NULL, true};
    struct ggml_context *cw = ggml_init(wp);
    struct ggml_tensor *w = ggml_new_tensor_2d(cw, type, cols, rows);
    size_t gsize = ggml_tensor_overhead() * (2 * NODES + 4) + ggml_graph_overhead_custom(NODES * 2, false);
    struct ggml_init_params gp = {gsize, NULL, true};
    struct ggml_context *cg = ggml_init(gp);
    struct ggml_tensor *x[NODES];
    for (int i = 0; i < NODES; i++) {
        x[i] = ggml_new_tensor_2d(cg, GGML_TYPE_F32, cols, 1);
    }
    struct ggml_cgraph *graph = ggml_new_graph_custom(cg, NODES * 2, false);
    struct ggml_tensor *first = NULL;
    for (int i = 0; i < NODES; i++) {
        struct ggml_tensor *y = ggml_mul_mat(cg, w, x[i]);
        if (!first) {
            first = y;
        }
        ggml_build_forward_expand(graph, y);
    }

    ggml_backend_dev_t dev = ggml_backend_get_device(be);
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_dev_get_extra_bufts_t extra = (ggml_backend_dev_get_extra_bufts_t)
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    ggml_backend_buffer_type_t buft = ggml_backend_cpu_buffer_type();
    if (extra) {
        for (ggml_backend_buffer_type_t *b = extra(dev); b && *b; b++) {
            if (takes(dev, *b, w, first)) {
                buft = *b;
                break;
            }
        }
    }
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(cw, buft);
    ggml_backend_buffer_t gbuf = ggml_backend_alloc_ctx_tensors_from_buft(cg, ggml_backend_cpu_buffer_type());
    if (!wbuf || !gbuf) {
        fprintf(stderr, "could not allocate %s\n", name);
        return 1;
    }

    float *values = malloc(sizeof(float) * (size_t)rows * (size_t)cols);
    unsigned long long s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < (size_t)rows * (size_t)cols; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        values[i] = (float)((s >> 40) % 2001) / 1000.0f - 1.0f;
    }
    void *q = malloc(ggml_nbytes(w));
    ggml_quantize_chunk(type, values, q, 0, rows, cols, NULL);
    ggml_backend_tensor_set(w, q, 0, ggml_nbytes(w));
    for (int i = 0; i < cols; i++) {
        values[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    }
    size_t row = sizeof(float) * (size_t)cols;
    for (int i = 0; i < NODES; i++) {
        ggml_backend_tensor_set(x[i], values, 0, row);
    }

    ggml_backend_graph_compute(be, graph);
    double best = 0.0;
    for (int r = 0; r < 5; r++) {
        double t0 = now_s();
        long calls = 0;
        while ((now_s() - t0) * 1e3 < ms) {
            for (int i = 0; i < NODES; i++) {
                ggml_backend_tensor_set(x[i], values, 0, row);
            }
            ggml_backend_graph_compute(be, graph);
            calls++;
        }
        double macs = (double)rows * cols * NODES * (double)calls;
        double g = macs / (now_s() - t0) / 1e9;
        if (g > best) {
            best = g;
        }
    }
    printf("{\"format\":\"%s\",\"threads\":%d,\"rows\":%d,\"cols\":%d,\"buffer\":\"%s\","
           "\"resident_gmacs\":%.3f}\n",
           name, threads, rows, cols, ggml_backend_buft_name(buft), best);
    fflush(stdout);
    free(q);
    free(values);
    ggml_backend_buffer_free(gbuf);
    ggml_backend_buffer_free(wbuf);
    ggml_free(cg);
    ggml_free(cw);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s THREADS COLS RESIDENT_BYTES MS FORMAT...\n", argv[0]);
        return 2;
    }
    int threads = atoi(argv[1]);
    int cols = atoi(argv[2]);
    size_t resident = (size_t)atol(argv[3]);
    double ms = atof(argv[4]);
    ggml_cpu_init();
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, threads);
    int rc = 0;
    for (int i = 5; i < argc; i++) {
        rc |= measure(be, threads, cols, resident, ms, argv[i]);
    }
    ggml_backend_free(be);
    return rc;
}
