// Internal to models/: typed reads of optional config.json fields, shared by ModelConfig's
// parser and the per-family readers (models/deepseek_config.cpp). Each leaves `out` unchanged
// when the field is absent or null and returns corrupt, naming the field, for a wrong type.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace brigade {

// An integer in int32 range; `required` makes absence an error too.
Status read_int(const nlohmann::json& j, const char* key, int& out, bool required);
Status read_float(const nlohmann::json& j, const char* key, float& out);
Status read_bool(const nlohmann::json& j, const char* key, bool& out);
Status read_string(const nlohmann::json& j, const char* key, std::string& out);
// eos_token_id: one id or a list of ids into eos (left unchanged when absent or null); corrupt
// for another type.
Status read_eos(const nlohmann::json& j, std::vector<int>& eos);
// torch_dtype (or transformers >= 4.56's dtype): float32, float16 or bfloat16; unsupported for
// another type.
Status read_dtype(const nlohmann::json& j, DType& out);

// architectures[0], or "" when absent (or not a string).
std::string config_architecture(const nlohmann::json& j);
// model_type, or `fallback` when absent (or not a string).
std::string config_model_type(const nlohmann::json& j, const char* fallback = "");
// A family test: whether architectures[0] is one of `classes`, or, without architectures, model_type
// is one of `types` (the class named decides, as in config_architecture's dispatch).
bool config_names_class(const nlohmann::json& j, std::initializer_list<const char*> classes,
                        std::initializer_list<const char*> types);
// A *ForConditionalGeneration's text_config with the top level's bos / eos ids and dtype where it
// lacks them (Gemma 3n's, Gemma 4's); unsupported without a text_config object, the message
// naming `arch` and its text-only form `text_only` ("Gemma4ForCausalLM (model_type gemma4_text)").
Expected<nlohmann::json> text_config_with_ids(const nlohmann::json& j, const std::string& arch,
                                              const std::string& text_only);

}  // namespace brigade
