// Loads a multimodal projector GGUF (mmproj) through llama.cpp's own mtmd library, on the CPU,
// with flash attention as asked, so clip's warm-up reserve prints its buffers
// ("model size", "CPU compute buffer size"); measure_mmproj.py parses them. Nothing here models
// anything: it only lets llama.cpp report what it allocates.
//
// build (in vendor/llama.cpp, after `cmake --build build --target mtmd`):
//   g++ -std=c++17 -O1 -I include -I ggml/include -I tools/mtmd clip_buffers.cpp \
//       -o clip_buffers -L build/bin -lmtmd -lllama -lggml -lggml-base -Wl,-rpath,$PWD/build/bin
//
// usage: clip_buffers MMPROJ.gguf on|off
#include "mtmd.h"
#include "ggml-backend.h"

#include <cstdio>
#include <cstring>

int main(int argc, char ** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MMPROJ.gguf on|off\n", argv[0]);
        return 2;
    }
    mtmd_context_params p = mtmd_context_params_default();
    p.use_gpu = false;
    // clip's warm-up is the reserve that sizes the compute buffer (no image is encoded).
    p.warmup = true;
    p.flash_attn_type = strcmp(argv[2], "on") == 0 ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    mtmd_context * ctx = mtmd_init_from_file(argv[1], nullptr, p);
    if (ctx == nullptr) {
        fprintf(stderr, "failed to load %s\n", argv[1]);
        return 1;
    }
    mtmd_free(ctx);
    // The same reserve without allocating, as llama-server's fit asks it: weights and compute
    // buffer per device, in bytes (the log above rounds to 0.01 MiB).
    for (const auto & [dev, size] : mtmd_get_memory_usage(argv[1], p)) {
        printf("memory usage: %s %zu\n", ggml_backend_dev_name(dev), size);
    }
    return 0;
}
