// llama.cpp's own per-device memory projection, in bytes: the dry run `llama-fit-params -fitp on`
// prints in whole MiB, here exact. It takes llama-fit-params' flags (-m, -c, -ngl, -ts, -ot,
// --n-cpu-moe, -fa, --rpc, -nkvo, ...) and prints one line a device, then `Host`:
//   <device> <model bytes> <context bytes> <compute bytes>
// With BREAKDOWN_EMBEDDINGS=1 in the environment the context computes embeddings (what
// `llama-server --embedding` does; llama-fit-params has no such flag), pooled as the model says.
// Build it against the llama.cpp that llama-cpp-python 0.3.36 vendors (see README.md).

#include "llama.h"

#include "arg.h"
#include "common.h"
#include "fit.h"
#include "log.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char ** argv) {
    common_params params;
    common_init();
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_FIT_PARAMS)) {
        return 1;
    }
    llama_backend_init();
    auto mparams = common_model_params_to_llama(params);
    auto cparams = common_context_params_to_llama(params);
    if (const char * e = getenv("BREAKDOWN_EMBEDDINGS"); e != nullptr && e[0] == '1') {
        cparams.embeddings = true;
    }

    std::vector<ggml_backend_dev_t> devs;
    uint32_t n_layer = 0, n_ctx_train = 0, n_expert = 0;
    const common_device_memory_data_vec dmds = common_get_device_memory_data(
        params.model.path.c_str(), &mparams, &cparams, devs, n_layer, n_ctx_train, n_expert,
        GGML_LOG_LEVEL_ERROR);
    for (size_t i = 0; i < dmds.size(); i++) {
        const char * name = i < devs.size() ? ggml_backend_dev_name(devs[i]) : "Host";
        printf("%s %zu %zu %zu\n", name, dmds[i].model, dmds[i].context, dmds[i].compute);
    }
    printf("n_ctx %" PRIu32 " n_layer %" PRIu32 "\n", cparams.n_ctx, n_layer);
    return 0;
}
