#include "messages/convert.h"

#include "core/status.h"

namespace brigade {
namespace {

template <class E>
std::vector<E> copy_primitive(typename capnp::List<E>::Reader list) {
  std::vector<E> out;
  out.reserve(list.size());
  for (E v : list) out.push_back(v);
  return out;
}

template <class E>
void fill_primitive(typename capnp::List<E>::Builder list, std::span<const E> values) {
  BRIGADE_CHECK(list.size() == values.size(), "fill_list: list initialised with another size");
  for (unsigned i = 0; i < values.size(); ++i) list.set(i, values[i]);
}

}  // namespace

std::vector<int32_t> to_vector(capnp::List<int32_t>::Reader list) {
  return copy_primitive<int32_t>(list);
}

std::vector<uint64_t> to_vector(capnp::List<uint64_t>::Reader list) {
  return copy_primitive<uint64_t>(list);
}

std::vector<float> to_vector(capnp::List<float>::Reader list) {
  return copy_primitive<float>(list);
}

std::vector<std::string> to_vector(capnp::List<capnp::Text>::Reader list) {
  std::vector<std::string> out;
  out.reserve(list.size());
  for (auto text : list) out.emplace_back(text.begin(), text.size());
  return out;
}

void fill_list(capnp::List<int32_t>::Builder list, std::span<const int32_t> values) {
  fill_primitive<int32_t>(list, values);
}

void fill_list(capnp::List<uint64_t>::Builder list, std::span<const uint64_t> values) {
  fill_primitive<uint64_t>(list, values);
}

void fill_list(capnp::List<float>::Builder list, std::span<const float> values) {
  fill_primitive<float>(list, values);
}

}  // namespace brigade
