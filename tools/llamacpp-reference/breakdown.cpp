// llama.cpp's own per-device memory projection, in bytes: the dry run `llama-fit-params -fitp on`
// prints in whole MiB, here exact. It takes llama-fit-params' flags (-m, -c, -ngl, -ts, -ot,
// --n-cpu-moe, -fa, --rpc, -nkvo, ...) and prints one line a device, then `Host`:
//   <device> <model bytes> <context bytes> <compute bytes>
// With BREAKDOWN_EMBEDDINGS=1 in the environment the context computes embeddings (what
// `llama-server --embedding` does; llama-fit-params has no such flag), pooled as the model says.
// With BREAKDOWN_SERVER_OUTPUTS=1 the context keeps logits only for the last token of each of
// its -np sequences, as llama-server sets it (`server_output_limits`: n_outputs_max =
// n_parallel, one a sequence, without speculative decoding).
// With BREAKDOWN_KV_UNIFIED=1 the -np sequences share one KV cache (llama-server's -kvu).
// With BREAKDOWN_DRAFT=FILE a draft model is loaded beside it as llama-server loads one for
// `-md FILE --spec-type draft-simple --spec-draft-n-max N` (N from BREAKDOWN_DRAFT_N_MAX, 3 by
// default; the draft's -ngld from BREAKDOWN_DRAFT_NGL, all by default): its parameters come
// from llama.cpp's own `common_base_params_to_speculative`, the target's logits rows from
// `common_speculative_get_output_limits` (this implies BREAKDOWN_SERVER_OUTPUTS=1). The dry run
// prints the target's lines, then `Draft`, then the draft's; the fit fits both together
// (`common_fit_extra_model`, as `common_init_from_params` does).
// With BREAKDOWN_MMPROJ=FILE the fit keeps a multimodal projector's memory free on its device,
// as llama-server does for `--mmproj FILE` (server-context.cpp: `mtmd_get_memory_usage` on the
// first GPU, each device's bytes added to `fit_params_target` by the device's registry index);
// it prints `mmproj DEVICE BYTES INDEX` for each (INDEX: the target it was added to, -1: none). Build with `-I tools/mtmd ... -lmtmd`.
// With BREAKDOWN_FIT=1 it runs llama.cpp's fit instead (`common_fit_params`, as
// llama-fit-params does, with -fitt/-fitc) and prints the fitted arguments as llama-fit-params
// prints them: with BREAKDOWN_SERVER_OUTPUTS=1 that is the fit `llama-server --fit` makes.
// Build it against the llama.cpp that llama-cpp-python 0.3.36 vendors (see README.md).

#include "llama.h"

#include "arg.h"
#include "common.h"
#include "fit.h"
#include "log.h"
#include "mtmd.h"
#include "speculative.h"

#include <cinttypes>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <vector>

// The draft's model and context parameters, as llama-server derives them.
struct draft_params {
    common_params       params;
    llama_model_params  mparams;
    llama_context_params cparams;
};

// Sets up `params` for a draft named by BREAKDOWN_DRAFT; false when none is.
static bool draft_setup(common_params & params, draft_params & d) {
    const char * path = getenv("BREAKDOWN_DRAFT");
    if (path == nullptr || path[0] == '\0') {
        return false;
    }
    params.speculative.draft.mparams.path = path;
    params.speculative.types = { COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE };
    if (const char * n = getenv("BREAKDOWN_DRAFT_N_MAX"); n != nullptr) {
        params.speculative.draft.n_max = atoi(n);
    }
    if (const char * n = getenv("BREAKDOWN_DRAFT_NGL"); n != nullptr) {
        params.speculative.draft.n_gpu_layers = atoi(n);
    }
    // llama-server's output limits for the target (server_output_limits).
    const auto limits = common_speculative_get_output_limits(
        params.n_batch, params.n_parallel, common_speculative_n_max(&params.speculative));
    params.n_outputs_max         = std::max<int32_t>(1, limits.total);
    params.n_outputs_max_per_seq = std::max<int32_t>(1, limits.per_seq);
    d.params  = common_base_params_to_speculative(params);
    d.mparams = common_model_params_to_llama(d.params);
    d.cparams = common_context_params_to_llama(d.params);
    d.cparams.n_rs_seq = 0;
    return true;
}

// Adds the projector BREAKDOWN_MMPROJ names to the fit's margins, as llama-server does: each
// device's bytes to the target of the device's index in the backend registry. Where a GPU's
// registry index is not its index among the model's devices (ggml-rpc's devices, registered
// after the CPU), that target is another device's. With BREAKDOWN_MMPROJ_BY_GPU=1 the bytes go
// to the GPU's own index among the GPUs instead (the CPU's to none), which is where they land
// on a build whose GPUs come first in the registry (ggml-cuda, ggml-vulkan, ggml-metal).
static void add_mmproj(common_params & params) {
    const char * path = getenv("BREAKDOWN_MMPROJ");
    if (path == nullptr) {
        return;
    }
    const char * by = getenv("BREAKDOWN_MMPROJ_BY_GPU");
    const bool by_gpu = by != nullptr && by[0] == '1';
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu         = params.mmproj_use_gpu;
    mp.device          = params.mmproj_device;
    mp.flash_attn_type = params.flash_attn_type;
    mp.warmup          = params.warmup;
    for (auto & [dev, size] : mtmd_get_memory_usage(path, mp)) {
        // The target it is added to (-1: none).
        long index = -1;
        long gpu = 0;
        for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
            ggml_backend_dev_t d = ggml_backend_dev_get(i);
            const bool is_cpu = ggml_backend_dev_type(d) == GGML_BACKEND_DEVICE_TYPE_CPU;
            if (d == dev) {
                const long at = by_gpu ? (is_cpu ? -1 : gpu) : long(i);
                if (at >= 0 && size_t(at) < params.fit_params_target.size()) {
                    params.fit_params_target[at] += size;
                    index = at;
                }
                break;
            }
            gpu += is_cpu ? 0 : 1;
        }
        printf("mmproj %s %zu %ld\n", ggml_backend_dev_name(dev), size, index);
    }
}

// llama.cpp's fit of `mparams`/`cparams`, printed as llama-fit-params prints it.
static int fit(common_params & params, llama_model_params & mparams, llama_context_params & cparams,
        const common_fit_extra_model * extra) {
    const common_params_fit_status status = common_fit_params(params.model.path.c_str(), &mparams,
        &cparams, params.tensor_split, params.tensor_buft_overrides.data(),
        params.fit_params_target.data(), params.fit_params_min_ctx, extra,
        params.verbosity >= LOG_LEVEL_DEBUG ? GGML_LOG_LEVEL_DEBUG : GGML_LOG_LEVEL_ERROR);
    if (status != COMMON_PARAMS_FIT_STATUS_SUCCESS) {
        fprintf(stderr, "failed to fit\n");
        return 1;
    }
    printf("-c %" PRIu32 " -ngl %" PRIi32, cparams.n_ctx, mparams.n_gpu_layers);
    size_t nd = llama_max_devices();
    while (nd > 1 && mparams.tensor_split[nd - 1] == 0.0f) {
        nd--;
    }
    for (size_t id = 0; nd > 1 && id < nd; id++) {
        printf("%s%" PRIu32, id == 0 ? " -ts " : ",", uint32_t(mparams.tensor_split[id]));
    }
    const size_t ntbo = llama_max_tensor_buft_overrides();
    bool any = false;
    for (size_t i = 0; i < ntbo && mparams.tensor_buft_overrides[i].pattern != nullptr; i++) {
        printf("%s%s=%s", i == 0 ? " -ot \"" : ",", mparams.tensor_buft_overrides[i].pattern,
            ggml_backend_buft_name(mparams.tensor_buft_overrides[i].buft));
        any = true;
    }
    printf("%s\n", any ? "\"" : "");
    return 0;
}

int main(int argc, char ** argv) {
    common_params params;
    common_init();
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_FIT_PARAMS)) {
        return 1;
    }
    llama_backend_init();
    draft_params draft;
    const bool has_draft = draft_setup(params, draft);
    auto mparams = common_model_params_to_llama(params);
    auto cparams = common_context_params_to_llama(params);
    if (const char * e = getenv("BREAKDOWN_EMBEDDINGS"); e != nullptr && e[0] == '1') {
        cparams.embeddings = true;
    }
    if (const char * e = getenv("BREAKDOWN_SERVER_OUTPUTS"); !has_draft && e != nullptr && e[0] == '1') {
        cparams.n_outputs_max         = params.n_parallel > 0 ? params.n_parallel : 1;
        cparams.n_outputs_max_per_seq = 1;
    }

    if (const char * e = getenv("BREAKDOWN_KV_UNIFIED"); e != nullptr && e[0] == '1') {
        cparams.kv_unified = true;
    }
    if (const char * e = getenv("BREAKDOWN_FIT"); e != nullptr && e[0] == '1') {
        const common_fit_extra_model extra = {
            draft.params.model.path.c_str(), &draft.mparams, &draft.cparams, false,
        };
        add_mmproj(params);
        return fit(params, mparams, cparams, has_draft ? &extra : nullptr);
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
    if (has_draft) {
        // The draft's context follows the target's.
        draft.cparams.n_ctx = cparams.n_ctx;
        std::vector<ggml_backend_dev_t> ddevs;
        const common_device_memory_data_vec dd = common_get_device_memory_data(
            draft.params.model.path.c_str(), &draft.mparams, &draft.cparams, ddevs, n_layer,
            n_ctx_train, n_expert, GGML_LOG_LEVEL_ERROR);
        printf("Draft\n");
        for (size_t i = 0; i < dd.size(); i++) {
            const char * name = i < ddevs.size() ? ggml_backend_dev_name(ddevs[i]) : "Host";
            printf("%s %zu %zu %zu\n", name, dd[i].model, dd[i].context, dd[i].compute);
        }
    }
    return 0;
}
