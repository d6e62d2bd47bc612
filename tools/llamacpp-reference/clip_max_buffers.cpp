// Loads a multimodal projector GGUF through llama.cpp's own clip, on the CPU, with flash
// attention as asked and `--image-max-tokens` as given (0: the projector's own limit), lets clip
// warm up as llama-server does, then encodes one image of SIDE x SIDE pixels (already
// preprocessed: the size clip's resize gives the largest square image it accepts). ggml's
// scheduler grows the compute buffer for that graph inside ggml_backend_sched_alloc_graph; this
// tool wraps that call, prints each backend's buffer in bytes once it returns, and exits before
// the graph is computed (a real-width tower at thousands of patches takes hours on a CPU).
// The warm-up reserve's bytes are printed the same way. Nothing here models anything.
//
// clip's functions are hidden in libmtmd.so, so this links the objects libmtmd was built from
// (in vendor/llama.cpp, after `cmake --build build --target mtmd`; D=build/tools/mtmd/CMakeFiles/mtmd.dir):
//   g++ -std=c++17 -O1 -I include -I ggml/include -I tools/mtmd clip_max_buffers.cpp \
//       $D/clip.cpp.o $D/mtmd-image.cpp.o $D/mtmd-audio.cpp.o $D/mtmd.cpp.o $D/models/*.o \
//       -o clip_max_buffers -L build/bin -lllama -lggml -lggml-base -ldl \
//       -Wl,-rpath,$PWD/build/bin
//
// usage: clip_max_buffers MMPROJ.gguf on|off SIDE_PX MAX_TOKENS
#include "clip.h"
#include "clip-impl.h"
#include "ggml-backend.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static void print_buffers(const char * what, ggml_backend_sched_t sched) {
    for (int i = 0; i < ggml_backend_sched_get_n_backends(sched); i++) {
        ggml_backend_t b = ggml_backend_sched_get_backend(sched, i);
        printf("%s buffer: %s %zu\n", what, ggml_backend_name(b), ggml_backend_sched_get_buffer_size(sched, b));
    }
    fflush(stdout);
}

// clip's warm-up: the reserve for its own image.
extern "C" bool ggml_backend_sched_reserve(ggml_backend_sched_t sched, struct ggml_cgraph * graph) {
    using fn = bool (*)(ggml_backend_sched_t, struct ggml_cgraph *);
    static fn real = (fn) dlsym(RTLD_NEXT, "ggml_backend_sched_reserve");
    const bool ok = real(sched, graph);
    print_buffers("warmup", sched);
    return ok;
}

// clip_encode's allocation for the image given: the buffer grows here when the graph needs more.
extern "C" bool ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, struct ggml_cgraph * graph) {
    using fn = bool (*)(ggml_backend_sched_t, struct ggml_cgraph *);
    static fn real = (fn) dlsym(RTLD_NEXT, "ggml_backend_sched_alloc_graph");
    const bool ok = real(sched, graph);
    print_buffers("encode", sched);
    printf("encode graph nodes: %d\n", ggml_graph_n_nodes(graph));
    fflush(stdout);
    fflush(stderr);
    _exit(ok ? 0 : 1);
}

int main(int argc, char ** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s MMPROJ.gguf on|off SIDE_PX MAX_TOKENS\n", argv[0]);
        return 2;
    }
    clip_context_params p{};
    p.use_gpu = false;
    p.flash_attn_type = strcmp(argv[2], "on") == 0 ? CLIP_FLASH_ATTN_TYPE_ENABLED : CLIP_FLASH_ATTN_TYPE_DISABLED;
    p.image_min_tokens = -1;
    p.image_max_tokens = atoi(argv[4]) > 0 ? atoi(argv[4]) : -1;
    p.warmup = true;
    clip_init_result r = clip_init(argv[1], p);
    if (r.ctx_v == nullptr) {
        fprintf(stderr, "failed to load %s\n", argv[1]);
        return 1;
    }
    const int side = atoi(argv[3]);
    clip_image_f32_batch batch;
    clip_image_f32 img;
    img.set_size({side, side}, false, false);
    batch.entries.push_back(img);
    std::vector<float> out;
    clip_image_batch_encode(r.ctx_v, 1, &batch, out);
    fprintf(stderr, "encode returned without allocating\n");
    return 1;
}
