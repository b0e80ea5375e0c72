// Small conversions between Cap'n Proto lists/text and standard containers, for actor code.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <capnp/blob.h>
#include <capnp/list.h>

namespace brigade {

// Copies a list of ids (tokens, pages) out of a message.
std::vector<int32_t> to_vector(capnp::List<int32_t>::Reader list);
std::vector<uint64_t> to_vector(capnp::List<uint64_t>::Reader list);
std::vector<float> to_vector(capnp::List<float>::Reader list);  // embeddings
// Copies a list of texts (e.g. stop strings) out of a message.
std::vector<std::string> to_vector(capnp::List<capnp::Text>::Reader list);

// Fills a list builder from values. The builder must have been initialised with exactly
// values.size() elements (`fill_list(b.initTokenIds(ids.size()), ids)`); a size mismatch is a bug.
void fill_list(capnp::List<int32_t>::Builder list, std::span<const int32_t> values);
void fill_list(capnp::List<uint64_t>::Builder list, std::span<const uint64_t> values);
void fill_list(capnp::List<float>::Builder list, std::span<const float> values);

// Message bytes (capnp Data) as a string, and a string's bytes as Data for a setter (valid while
// `s` lives).
inline std::string to_string(capnp::Data::Reader d) { return {reinterpret_cast<const char*>(d.begin()), d.size()}; }
inline capnp::Data::Reader as_data(const std::string& s) {
  return {reinterpret_cast<const kj::byte*>(s.data()), s.size()};
}

// A view of message text; valid while the message lives.
inline std::string_view to_string_view(capnp::Text::Reader text) {
  return {text.begin(), text.size()};
}

}  // namespace brigade
