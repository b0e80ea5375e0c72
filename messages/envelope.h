// msg<T>: the envelope that carries one Cap'n Proto message between actors (DESIGN.md §3).
//
// A msg<T> is an immutable, reference-counted Cap'n Proto message whose root is the struct T
// (e.g. msg<schema::GenerateRequest>). Copying a msg copies a shared pointer: in one process a
// message is never serialised or copied. Across processes CAF serialises it as the flat Cap'n
// Proto bytes (segment table + segments, `to_bytes()`), and the receiving side validates them
// completely (`from_bytes()`) before any actor sees the message, so a malformed or hostile
// payload becomes an error at the boundary instead of an exception deep inside an actor.
//
// Thread safety: a msg and all its copies may be read from any number of threads at once; the
// storage is never written after `build` returns or `from_bytes` succeeds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <capnp/any.h>
#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/schema.h>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/none.hpp>

#include "core/status.h"
#include "messages/error.h"

namespace brigade {

// Largest flat message accepted from outside the process (256 MiB). Control-plane messages are
// small; bulk data travels through the data plane (BlobRef), so anything larger is an attack or
// a bug, and refusing it bounds the memory a peer can make us allocate.
inline constexpr std::size_t max_message_bytes = std::size_t{256} << 20;

namespace detail {

// The words of one immutable message and the capnp object that owns them, shared by all copies
// of a msg. Either built in-process (a MallocMessageBuilder) or parsed from flat bytes (an
// aligned copy of the bytes plus a FlatArrayMessageReader over them).
class MessageStorage {
 public:
  // Storage for a message about to be built: fill `builder()`, then call `seal()` exactly once.
  static std::shared_ptr<MessageStorage> for_building();

  // Parses `bytes` as one flat message whose root is a struct of `schema`, and validates the
  // whole message (segment table, every pointer, text termination, enum values and union tags
  // against the schema) under bounded traversal and nesting limits. Errors are `corrupt` Statuses
  // that say what was wrong; no exception escapes.
  static Expected<std::shared_ptr<const MessageStorage>> parse(std::span<const uint8_t> bytes,
                                                               capnp::StructSchema schema);

  MessageStorage();
  ~MessageStorage();
  MessageStorage(const MessageStorage&) = delete;
  MessageStorage& operator=(const MessageStorage&) = delete;

  // Valid only between for_building() and seal().
  capnp::MessageBuilder& builder();
  // Freezes the message: records its segments and root. No writes after this.
  void seal();

  capnp::AnyPointer::Reader root() const { return root_; }
  // Size of the flat serialisation (segment table + segments) in bytes; a multiple of 8.
  std::size_t n_flat_bytes() const;
  // Writes the flat serialisation into `out`, which must hold n_flat_bytes() bytes.
  void write_flat(uint8_t* out) const;
  // First byte of the first segment: identifies the storage (tests check zero copy with it).
  const void* data() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  capnp::AnyPointer::Reader root_;
};

// Renders a struct reader as Cap'n Proto text (for logs and CAF's deep_to_string).
std::string render_struct(capnp::DynamicStruct::Reader reader);

}  // namespace detail

template <class T>
class msg {
 public:
  using schema_type = T;
  using reader_type = typename T::Reader;
  using builder_type = typename T::Builder;

  // An empty envelope (no message). CAF needs default-constructible message types; an empty msg
  // serialises as zero bytes and reads back as empty.
  msg() = default;

  // Builds a message: `fill(typename T::Builder)` sets the fields of a fresh root. The message is
  // immutable once build returns. Exceptions thrown by `fill` (including kj::Exception from
  // capnp setters) propagate to the caller; this is for in-process code, not untrusted input.
  template <class F>
  static msg build(F&& fill) {
    auto storage = detail::MessageStorage::for_building();
    std::forward<F>(fill)(storage->builder().template initRoot<T>());
    storage->seal();
    return msg(std::shared_ptr<const detail::MessageStorage>(std::move(storage)));
  }

  // A new message holding a copy of every field of this one, then `edit(typename T::Builder)`
  // applied to it (the way to change a field or two of a message without naming the others).
  // The attachment, if any, is shared with the copy. Must not be empty.
  template <class F>
  msg edited(F&& edit) const {
    auto storage = detail::MessageStorage::for_building();
    storage->builder().setRoot(reader());
    std::forward<F>(edit)(storage->builder().template getRoot<T>());
    storage->seal();
    msg m(std::shared_ptr<const detail::MessageStorage>(std::move(storage)));
    m.attachment_ = attachment_;
    return m;
  }

  // build, plus an object the message keeps alive for as long as it or any in-process copy of
  // it lives (a data-plane buffer that a BlobRef in the message names by a local handle,
  // messages/blob.h). The attachment is not part of the flat bytes: it never crosses processes.
  template <class F>
  static msg build_attached(std::shared_ptr<const void> attachment, F&& fill) {
    msg m = build(std::forward<F>(fill));
    m.attachment_ = std::move(attachment);
    return m;
  }

  // Parses and fully validates flat Cap'n Proto bytes (as written by to_bytes). Any defect gives
  // a `corrupt` Status naming it: empty or non-word-sized input, a bad segment table, trailing
  // bytes, out-of-bounds pointers, traversal/nesting limits exceeded, unterminated text, unknown
  // enum values or union tags. The bytes are copied into aligned storage, so `bytes` may be
  // unaligned and need not outlive the call.
  static Expected<msg> from_bytes(std::span<const uint8_t> bytes) {
    auto storage = detail::MessageStorage::parse(bytes, capnp::Schema::from<T>());
    if (!storage.has_value()) return storage.status();
    return msg(std::move(storage).value());
  }

  bool empty() const { return storage_ == nullptr; }

  // The root reader. Valid as long as this msg or any copy of it lives. Must not be empty.
  reader_type reader() const {
    BRIGADE_CHECK(!empty(), "reading an empty msg: check empty() first");
    return root_;
  }
  // `m->getRequestId()`. Must not be empty.
  const reader_type* operator->() const {
    BRIGADE_CHECK(!empty(), "reading an empty msg: check empty() first");
    return &root_;
  }

  // The flat Cap'n Proto serialisation (what messageToFlatArray writes). Empty for an empty msg.
  // A message parsed by from_bytes serialises back to exactly the bytes it was parsed from.
  std::vector<uint8_t> to_bytes() const {
    if (empty()) return {};
    std::vector<uint8_t> out(storage_->n_flat_bytes());
    storage_->write_flat(out.data());
    return out;
  }

  // Identifies the shared storage: copies of a msg return the same pointer (zero copy).
  const void* storage_id() const { return empty() ? nullptr : storage_->data(); }

  // Cap'n Proto text rendering of the message, "<empty>" for an empty msg.
  std::string debug_string() const {
    if (empty()) return "<empty>";
    return detail::render_struct(capnp::toDynamic(root_));
  }

 private:
  explicit msg(std::shared_ptr<const detail::MessageStorage> storage)
      : storage_(std::move(storage)), root_(storage_->root().template getAs<T>()) {}

  std::shared_ptr<const detail::MessageStorage> storage_;
  reader_type root_;
  std::shared_ptr<const void> attachment_;  // build_attached's; null otherwise
};

// CAF 0.17 inspection. Serialisers write the flat bytes as a byte sequence (a size, then the raw
// bytes); deserialisers read them back through from_bytes, so a malformed payload yields a
// caf::error (category "brigade", code corrupt) instead of a crash. The size is checked against
// max_message_bytes before anything is allocated. Stringification (logs) renders the message as
// Cap'n Proto text.
template <class Inspector, class T>
typename Inspector::result_type inspect(Inspector& f, msg<T>& x) {
  if constexpr (std::is_void_v<typename Inspector::result_type>) {
    std::string text = x.debug_string();
    return f(caf::meta::type_name("brigade.msg"), text);
  } else if constexpr (Inspector::reads_state) {
    std::vector<uint8_t> bytes = x.to_bytes();
    std::size_t n_bytes = bytes.size();
    if (auto err = f.begin_sequence(n_bytes)) return err;
    if (n_bytes > 0) {
      if (auto err = f.apply_raw(n_bytes, bytes.data())) return err;
    }
    return f.end_sequence();
  } else {
    std::size_t n_bytes = 0;
    if (auto err = f.begin_sequence(n_bytes)) return err;
    if (n_bytes > max_message_bytes) {
      return to_caf_error(corrupt("serialized message claims " + std::to_string(n_bytes) +
                                  " bytes, more than the limit of " +
                                  std::to_string(max_message_bytes)));
    }
    std::vector<uint8_t> bytes(n_bytes);
    if (n_bytes > 0) {
      if (auto err = f.apply_raw(n_bytes, bytes.data())) return err;
    }
    if (auto err = f.end_sequence()) return err;
    if (bytes.empty()) {
      x = msg<T>();
      return caf::none;
    }
    auto parsed = msg<T>::from_bytes(bytes);
    if (!parsed.has_value()) return to_caf_error(parsed.status());
    x = std::move(parsed).value();
    return caf::none;
  }
}

}  // namespace brigade
