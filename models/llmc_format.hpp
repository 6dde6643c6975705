// llm.c checkpoint files, GPT-2's native format: 256 int32 of header (magic 20240326, version 3 =
// fp32, maxT, V, L, NH, C, Vp), then every parameter in llm.c's order, which the model gives as
// its file order ([Note: units and llm.c's order] in models/gpt2.hpp). Errors name the file and
// what is wrong.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "models/model.hpp"

namespace zt {

using LlmcHeader = std::array<int32_t, 256>;
LlmcHeader llmc_header(const ModelDims& d);
// The dimensions an llm.c file's header gives, after checking the header and the file's size.
ModelDims read_llmc_header(const std::string& path);
// The file holds GPT-2 only (ModelSpec::llmc): a model of another arch is refused with
// std::invalid_argument.
void check_llmc_model(const Model& model);
// The arch of the model an llm.c file holds.
std::string llmc_arch();
void load_llmc_checkpoint(const std::string& path, Model& model);
// Written under a temporary name, fsynced and renamed: never a truncated file under `path`.
void save_llmc_checkpoint(const std::string& path, const Model& model);

}  // namespace zt
