#include "server/embeddings_format.h"

#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

namespace brigade::server {

using json = nlohmann::json;

EmbedOptions EmbeddingsRequest::embed_options(size_t i) const {
  EmbedOptions o;
  o.prompt = inputs[i].text;
  o.prompt_ids = inputs[i].ids;
  o.add_bos = add_special_tokens;
  o.dimensions = dimensions;
  o.truncate_prompt_tokens = truncate_prompt_tokens;
  o.priority = priority;
  return o;
}

Expected<EmbeddingsRequest> parse_embeddings_body(std::string_view body, int max_inputs) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("the request body must be a JSON object");
  EmbeddingsRequest r;
  BRIGADE_RETURN_IF_ERROR(read_pooling_input(j, max_inputs, r.model, r.inputs, r.chat, r.add_special_tokens));
  if (auto f = j.find("encoding_format"); f != j.end() && !f->is_null()) {
    const std::string name = f->is_string() ? f->get<std::string>() : f->dump();
    if (name == "base64") r.encoding = EncodingFormat::base64;
    else if (name != "float") return invalid_argument("'encoding_format' must be \"float\" or \"base64\" (got " + name + ")");
  }
  if (auto d = j.find("dimensions"); d != j.end() && !d->is_null()) {
    if (!d->is_number_integer() || d->get<int64_t>() < 1 || d->get<int64_t>() > (1 << 20))
      return invalid_argument("'dimensions' must be an integer >= 1 (got " + d->dump() + ")");
    r.dimensions = static_cast<int>(d->get<int64_t>());
  }
  BRIGADE_RETURN_IF_ERROR(read_truncate_prompt_tokens(j, r.truncate_prompt_tokens));
  BRIGADE_RETURN_IF_ERROR(read_priority(j, r.priority));
  if (auto u = j.find("user"); u != j.end() && !u->is_null() && !u->is_string())
    return invalid_argument("'user' must be a string");
  return r;
}

std::string base64_f32(std::span<const float> values) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes(values.size() * 4);
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &values[i], 4);
    for (int b = 0; b < 4; ++b) bytes[4 * i + static_cast<size_t>(b)] = static_cast<uint8_t>(bits >> (8 * b));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = static_cast<uint32_t>(bytes[i]) << 16;
    if (n > 1) v |= static_cast<uint32_t>(bytes[i + 1]) << 8;
    if (n > 2) v |= bytes[i + 2];
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += n > 1 ? kAlphabet[(v >> 6) & 63] : '=';
    out += n > 2 ? kAlphabet[v & 63] : '=';
  }
  return out;
}

std::string embeddings_body(std::span<const Embedding> embeddings, EncodingFormat encoding, const std::string& model) {
  // Written by hand: nlohmann writes each float as a double's 17 digits; 9 give a float back exactly.
  std::string out = "{\"object\":\"list\",\"data\":[";
  int64_t n_tokens = 0;
  char num[32];
  for (size_t i = 0; i < embeddings.size(); ++i) {
    const Embedding& e = embeddings[i];
    n_tokens += e.prompt_tokens;
    out += i ? ",{" : "{";
    out += "\"object\":\"embedding\",\"index\":";
    out += std::to_string(i);
    out += ",\"embedding\":";
    if (encoding == EncodingFormat::base64) {
      out += '"';
      out += base64_f32(e.values);
      out += "\"}";
      continue;
    }
    out += '[';
    for (size_t k = 0; k < e.values.size(); ++k) {
      std::snprintf(num, sizeof num, "%s%.9g", k ? "," : "", static_cast<double>(e.values[k]));
      out += num;
    }
    out += "]}";
  }
  const std::string n = std::to_string(n_tokens);
  out += "],\"model\":";
  out += json(model).dump();
  out += ",\"usage\":{\"prompt_tokens\":";
  out += n;
  out += ",\"total_tokens\":";
  out += n;
  out += "}}";
  return out;
}

}  // namespace brigade::server
