// What llama.cpp allocates for a Gemma 4 assistant (`gemma4-assistant`) beside its target, as
// llama-server loads one for `-md ASSISTANT.gguf --spec-type draft-mtp`: the target's model and
// context first, then the assistant's model and an MTP context whose `ctx_other` is the target's
// (common/speculative.cpp, `common_speculative_init_result`): the draft's parameters from
// `common_base_params_to_speculative`, its n_ctx the target's, n_rs_seq 0. The assistant keeps
// no cache of its own (its layers view the target's last sliding and full layers' caches) and
// cannot be measured alone: llama.cpp's fit, which measures the draft alone, fails to and fits
// the target without it ("failed to measure the memory of the extra model").
//
// Both models are loaded without data (no_alloc, as `common_get_device_memory_data` does) and
// their buffers read from llama.cpp's own memory breakdown. It takes llama-fit-params' flags
// (-m TARGET, -c, -fa, -ngl, -ub, -np, --rpc, ...) with the assistant in ASSISTANT=FILE, and
// prints one line a device, then `Host`, for the target, then `Draft`, then the assistant's:
//   <device> <model bytes> <context bytes> <compute bytes>
// Build it against the llama.cpp that llama-cpp-python 0.3.36 vendors (see README.md):
//   g++ -std=c++17 -O1 -I include -I common -I ggml/include -I src -I vendor \
//       assistant_buffers.cpp -o assistant_buffers -L build/bin -lllama-common -lllama \
//       -lggml -lggml-base -Wl,-rpath,$PWD/build/bin

#include "llama.h"

#include "arg.h"
#include "common.h"
#include "llama-ext.h"
#include "speculative.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

// The bytes of `ctx` (of `model`) per device and, last, on the host.
static void print_breakdown(const llama_model * model, const llama_context * ctx) {
    const size_t nd = llama_model_n_devices(model);
    std::vector<llama_memory_breakdown_data> rows(nd + 1);
    for (const auto & [buft, mb] : llama_get_memory_breakdown(ctx)) {
        size_t at = nd;
        if (!ggml_backend_buft_is_host(buft)) {
            ggml_backend_dev_t dev = ggml_backend_buft_get_device(buft);
            for (size_t i = 0; i < nd; i++) {
                if (dev == llama_model_get_device(model, i)) {
                    at = i;
                }
            }
        }
        rows[at].model   += mb.model;
        rows[at].context += mb.context;
        rows[at].compute += mb.compute;
    }
    for (size_t i = 0; i < rows.size(); i++) {
        const char * name = i < nd ? ggml_backend_dev_name(llama_model_get_device(model, i)) : "Host";
        printf("%s %zu %zu %zu\n", name, rows[i].model, rows[i].context, rows[i].compute);
    }
}

int main(int argc, char ** argv) {
    common_params params;
    common_init();
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_FIT_PARAMS)) {
        return 1;
    }
    const char * assistant = getenv("ASSISTANT");
    if (assistant == nullptr) {
        fprintf(stderr, "ASSISTANT=FILE names the gemma4-assistant GGUF\n");
        return 1;
    }
    llama_backend_init();
    params.speculative.draft.mparams.path = assistant;
    params.speculative.types = { COMMON_SPECULATIVE_TYPE_DRAFT_MTP };
    // llama-server's output limits for the target (server_output_limits).
    const auto limits = common_speculative_get_output_limits(
        params.n_batch, params.n_parallel, common_speculative_n_max(&params.speculative));
    params.n_outputs_max         = std::max<int32_t>(1, limits.total);
    params.n_outputs_max_per_seq = std::max<int32_t>(1, limits.per_seq);

    auto mparams = common_model_params_to_llama(params);
    auto cparams = common_context_params_to_llama(params);
    mparams.no_alloc  = true;
    mparams.load_mode = LLAMA_LOAD_MODE_NONE;
    llama_model * target = llama_model_load_from_file(params.model.path.c_str(), mparams);
    llama_context * ctx_tgt = target ? llama_init_from_model(target, cparams) : nullptr;
    if (ctx_tgt == nullptr) {
        fprintf(stderr, "failed to load the target\n");
        return 1;
    }
    print_breakdown(target, ctx_tgt);
    printf("n_ctx %u\n", llama_n_ctx(ctx_tgt));

    // The assistant as common_speculative_init_result loads it.
    common_params params_dft = common_base_params_to_speculative(params);
    auto mparams_dft = common_model_params_to_llama(params_dft);
    auto cparams_dft = common_context_params_to_llama(params_dft);
    // ASSISTANT_MMAP=1: the assistant's weights mapped as llama-server maps them (the breakdown
    // then reports the mapped range), its buffers allocated.
    if (const char * e = getenv("ASSISTANT_MMAP"); e == nullptr || e[0] != '1') {
        mparams_dft.no_alloc  = true;
        mparams_dft.load_mode = LLAMA_LOAD_MODE_NONE;
    }
    cparams_dft.ctx_type  = LLAMA_CONTEXT_TYPE_MTP;
    cparams_dft.n_ctx     = llama_n_ctx(ctx_tgt);
    cparams_dft.n_rs_seq  = 0;
    cparams_dft.ctx_other = ctx_tgt;
    llama_model * draft = llama_model_load_from_file(params_dft.model.path.c_str(), mparams_dft);
    llama_context * ctx_dft = draft ? llama_init_from_model(draft, cparams_dft) : nullptr;
    if (ctx_dft == nullptr) {
        fprintf(stderr, "failed to load the assistant\n");
        return 1;
    }
    printf("Draft\n");
    print_breakdown(draft, ctx_dft);
    llama_free(ctx_dft);
    llama_model_free(draft);
    llama_free(ctx_tgt);
    llama_model_free(target);
    return 0;
}
