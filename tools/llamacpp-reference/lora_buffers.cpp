// llama.cpp's own buffers for a model with LoRA adapters, as llama-server loads them
// (`--lora FILE`): `common_init_from_params` loads the model, creates the context, loads each
// adapter (`llama_adapter_lora_init`: one buffer per buffer type of the model tensors it
// adapts) and applies them, and its warm-up decode reserves the compute graph with the
// adapters' matmuls in it. llama.cpp logs each buffer in MiB to two decimals; this prints the
// lines that matter, one a buffer:
//   lora <buffer> <MiB>       (llama_adapter_lora_init_impl's "LoRA buffer size")
//   compute <buffer> <MiB>    (the last reserve's "compute buffer size": with the adapters)
//   model <buffer> <MiB>      (the model's own buffers)
// Takes llama-server's flags (-m, -c, -ngl, -ts, -fa, --rpc, --lora, -ub, ...). Build it as
// breakdown.cpp is built (README.md); real loading reads the files, which may be sparse.

#include "llama.h"

#include "arg.h"
#include "common.h"
#include "log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

static std::vector<std::string> lines;

static void keep(ggml_log_level, const char * text, void *) {
    lines.emplace_back(text);
}

// "<func>: <buffer> <what> buffer size = <MiB> MiB" -> <buffer> <MiB>
static bool parse(const std::string & line, const char * what, std::string & buffer, std::string & mib) {
    const std::string tag = std::string(what) + " buffer size =";
    const size_t at = line.find(tag);
    if (at == std::string::npos) {
        return false;
    }
    const size_t colon = line.find(": ");
    if (colon == std::string::npos || colon > at) {
        return false;
    }
    buffer = line.substr(colon + 2, at - colon - 2);
    buffer.erase(0, buffer.find_first_not_of(' '));
    buffer.erase(buffer.find_last_not_of(' ') + 1);
    mib = line.substr(at + tag.size());
    mib.erase(0, mib.find_first_not_of(' '));
    mib = mib.substr(0, mib.find(' '));
    return true;
}

int main(int argc, char ** argv) {
    common_params params;
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_SERVER)) {
        return 1;
    }
    common_init();
    llama_log_set(keep, nullptr);
    llama_backend_init();
    auto init = common_init_from_params(params);
    if (init->context() == nullptr) {
        fprintf(stderr, "load failed\n");
        for (const auto & l : lines) {
            fputs(l.c_str(), stderr);
        }
        return 1;
    }
    if (getenv("LORA_BUFFERS_LOG") != nullptr) {
        for (const auto & l : lines) {
            fputs(l.c_str(), stderr);
        }
    }
    std::map<std::string, std::string> compute;
    for (const auto & l : lines) {
        std::string buffer, mib;
        if (parse(l, "LoRA", buffer, mib)) {
            printf("lora %s %s\n", buffer.c_str(), mib.c_str());
        } else if (parse(l, "compute", buffer, mib)) {
            compute[buffer] = mib;  // the last reserve's
        } else if (l.find("model buffer size =") != std::string::npos && parse(l, "model", buffer, mib)) {
            printf("model %s %s\n", buffer.c_str(), mib.c_str());
        }
    }
    for (const auto & [buffer, mib] : compute) {
        printf("compute %s %s\n", buffer.c_str(), mib.c_str());
    }
    return 0;
}
