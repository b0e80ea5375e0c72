#include "messages/envelope.h"

#include <cstring>
#include <exception>
#include <limits>

#include <capnp/serialize.h>
#include <kj/exception.h>
#include <kj/string.h>

namespace brigade::detail {
namespace {

// First segment of a built message: 2 KiB holds a typical request or event in one segment;
// larger messages grow into further segments (capnp's heuristic doubles them).
constexpr unsigned first_segment_words = 256;
// More segments than this is never produced by our builders for control-plane sizes and only
// makes the segment table a place to hide garbage.
constexpr uint32_t max_segments = 512;
// Nesting of our schemas is < 10; capnp's default (64) leaves room for schema growth.
constexpr int nesting_limit = 64;
constexpr std::size_t bytes_per_word = sizeof(capnp::word);

// A kj::Exception's description, printable: capnp quotes offending values verbatim, which may
// include NUL and other control bytes.
std::string describe(const kj::Exception& e) {
  auto text = e.getDescription();
  std::string out(text.begin(), text.size());
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n') c = '?';
  }
  return out;
}

// The validation walk: a well-formed message whose root is `schema` reads every field without a
// kj::Exception (bounds, nesting, traversal limit, text termination are checked by capnp as the
// pointers are followed) and holds only enum values and union tags that the schema knows.
// Schema-level defects come back as a Status naming the path of the bad field.
Status validate_struct(capnp::DynamicStruct::Reader value, std::string& path);

Status validate_value(capnp::DynamicValue::Reader value, capnp::Type type, std::string& path) {
  if (type.isStruct()) return validate_struct(value.as<capnp::DynamicStruct>(), path);
  if (type.isEnum()) {
    auto e = value.as<capnp::DynamicEnum>();
    if (e.getEnumerant() == nullptr) {
      return corrupt(path + ": value " + std::to_string(e.getRaw()) + " is not an enumerant of " +
                     std::string(type.asEnum().getShortDisplayName().cStr()));
    }
    return Status::ok();
  }
  if (type.isList()) {
    auto list = value.as<capnp::DynamicList>();
    auto element = type.asList().getElementType();
    // Elements of primitive lists were bounds-checked when the list pointer was read.
    if (!element.isStruct() && !element.isList() && !element.isEnum() && !element.isText() &&
        !element.isData()) {
      return Status::ok();
    }
    const std::size_t path_len = path.size();
    for (unsigned i = 0; i < list.size(); ++i) {
      path += '[';  // (three appends: GCC 12 warns falsely on "[" + std::string)
      path += std::to_string(i);
      path += ']';
      BRIGADE_RETURN_IF_ERROR(validate_value(list[i], element, path));
      path.resize(path_len);
    }
    return Status::ok();
  }
  if (type.isText()) {
    (void)value.as<capnp::Text>();  // reading checked the NUL terminator
  }
  return Status::ok();
}

Status validate_field(capnp::DynamicStruct::Reader value, capnp::StructSchema::Field field,
                      std::string& path) {
  const std::size_t path_len = path.size();
  path += ".";
  path += field.getProto().getName().cStr();
  try {
    BRIGADE_RETURN_IF_ERROR(validate_value(value.get(field), field.getType(), path));
  } catch (const kj::Exception& e) {
    return corrupt(path + ": invalid Cap'n Proto message: " + describe(e));
  }
  path.resize(path_len);
  return Status::ok();
}

Status validate_struct(capnp::DynamicStruct::Reader value, std::string& path) {
  auto schema = value.getSchema();
  if (schema.getUnionFields().size() > 0) {
    KJ_IF_MAYBE(active, value.which()) {
      BRIGADE_RETURN_IF_ERROR(validate_field(value, *active, path));
    } else {
      return corrupt(path + ": union tag is not a member of " +
                     std::string(schema.getShortDisplayName().cStr()));
    }
  }
  for (auto field : schema.getNonUnionFields()) {
    BRIGADE_RETURN_IF_ERROR(validate_field(value, field, path));
  }
  return Status::ok();
}

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));  // Cap'n Proto is little-endian, as are our targets
  return v;
}

// Checks the segment table before capnp sees it, so the common defects get a precise message.
// `n_words` is the whole input; returns the number of segments.
Expected<uint32_t> check_segment_table(std::span<const uint8_t> bytes, std::size_t n_words) {
  const uint64_t n_segments = uint64_t{read_u32(bytes.data())} + 1;
  if (n_segments > max_segments) {
    return corrupt("segment table claims " + std::to_string(n_segments) +
                   " segments, more than the limit of " + std::to_string(max_segments));
  }
  const uint64_t table_words = n_segments / 2 + 1;  // count + sizes, padded to a word
  if (table_words > n_words) {
    return corrupt("truncated segment table: " + std::to_string(n_segments) + " segments need " +
                   std::to_string(table_words * bytes_per_word) + " bytes, have " +
                   std::to_string(bytes.size()));
  }
  uint64_t body_words = 0;
  for (uint64_t i = 0; i < n_segments; ++i) {
    body_words += read_u32(bytes.data() + 4 + 4 * i);
  }
  const uint64_t have = n_words - table_words;
  if (body_words > have) {
    return corrupt("truncated message: segments need " + std::to_string(body_words * 8) +
                   " bytes after the segment table, have " + std::to_string(have * 8));
  }
  if (body_words < have) {
    return corrupt(std::to_string((have - body_words) * 8) +
                   " trailing bytes after the message's last segment");
  }
  return static_cast<uint32_t>(n_segments);
}

}  // namespace

struct MessageStorage::Impl {
  std::unique_ptr<capnp::MallocMessageBuilder> builder;  // built in-process
  kj::Array<capnp::word> words;                          // parsed: aligned copy of the input
  std::unique_ptr<capnp::FlatArrayMessageReader> reader;  // parsed: reads `words`
  std::vector<kj::ArrayPtr<const capnp::word>> segments;  // set by seal() or parse()
};

MessageStorage::MessageStorage() : impl_(std::make_unique<Impl>()) {}
MessageStorage::~MessageStorage() = default;

std::shared_ptr<MessageStorage> MessageStorage::for_building() {
  auto storage = std::make_shared<MessageStorage>();
  storage->impl_->builder = std::make_unique<capnp::MallocMessageBuilder>(first_segment_words);
  return storage;
}

capnp::MessageBuilder& MessageStorage::builder() {
  BRIGADE_CHECK(impl_->builder && impl_->segments.empty(), "builder() after seal()");
  return *impl_->builder;
}

void MessageStorage::seal() {
  BRIGADE_CHECK(impl_->builder && impl_->segments.empty(), "seal() called twice");
  auto segments = impl_->builder->getSegmentsForOutput();
  impl_->segments.assign(segments.begin(), segments.end());
  root_ = impl_->builder->getRoot<capnp::AnyPointer>().asReader();
}

Expected<std::shared_ptr<const MessageStorage>> MessageStorage::parse(
    std::span<const uint8_t> bytes, capnp::StructSchema schema) {
  const std::string what = schema.getShortDisplayName().cStr();
  if (bytes.empty()) return corrupt(what + ": empty message (no bytes)");
  if (bytes.size() % bytes_per_word != 0) {
    return corrupt(what + ": size " + std::to_string(bytes.size()) +
                   " bytes is not a multiple of 8 (Cap'n Proto messages are whole words)");
  }
  if (bytes.size() > max_message_bytes) {
    return corrupt(what + ": " + std::to_string(bytes.size()) +
                   " bytes is more than the limit of " + std::to_string(max_message_bytes));
  }
  const std::size_t n_words = bytes.size() / bytes_per_word;
  auto n_segments = check_segment_table(bytes, n_words);
  if (!n_segments.has_value()) {
    return corrupt(what + ": " + n_segments.status().message());
  }

  auto storage = std::make_shared<MessageStorage>();
  Impl& impl = *storage->impl_;
  impl.words = kj::heapArray<capnp::word>(n_words);  // aligned; the input may not be
  std::memcpy(impl.words.begin(), bytes.data(), bytes.size());
  try {
    // Validate under a traversal limit proportional to the size: a legitimate message reads each
    // word about once, so 4x bounds the work an amplification attack (aliased pointers) can cause.
    capnp::ReaderOptions checked;
    checked.traversalLimitInWords = 4 * uint64_t{n_words} + 64;
    checked.nestingLimit = nesting_limit;
    capnp::FlatArrayMessageReader check(impl.words.asPtr(), checked);
    std::string path = what;
    BRIGADE_RETURN_IF_ERROR(validate_struct(check.getRoot<capnp::DynamicStruct>(schema), path));

    // The long-lived reader: the message is known good, and actors may read it many times, so it
    // gets no traversal budget that repeated reads could exhaust (bounds are still checked).
    capnp::ReaderOptions trusted;
    trusted.traversalLimitInWords = std::numeric_limits<uint64_t>::max();
    trusted.nestingLimit = nesting_limit;
    impl.reader = std::make_unique<capnp::FlatArrayMessageReader>(impl.words.asPtr(), trusted);
    for (uint32_t i = 0; i < n_segments.value(); ++i) {
      impl.segments.push_back(impl.reader->getSegment(i));
    }
    storage->root_ = impl.reader->getRoot<capnp::AnyPointer>();
  } catch (const kj::Exception& e) {
    return corrupt(what + ": invalid Cap'n Proto message: " + describe(e));
  } catch (const std::exception& e) {
    return corrupt(what + ": invalid Cap'n Proto message: " + std::string(e.what()));
  }
  return std::shared_ptr<const MessageStorage>(std::move(storage));
}

std::size_t MessageStorage::n_flat_bytes() const {
  std::size_t n_words = impl_->segments.size() / 2 + 1;
  for (const auto& segment : impl_->segments) n_words += segment.size();
  return n_words * bytes_per_word;
}

void MessageStorage::write_flat(uint8_t* out) const {
  const auto& segments = impl_->segments;
  const std::size_t table_bytes = (segments.size() / 2 + 1) * bytes_per_word;
  std::memset(out, 0, table_bytes);  // the padding word half must be zero
  const auto count_minus_one = static_cast<uint32_t>(segments.size() - 1);
  std::memcpy(out, &count_minus_one, 4);
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const auto n_words = static_cast<uint32_t>(segments[i].size());
    std::memcpy(out + 4 + 4 * i, &n_words, 4);
  }
  out += table_bytes;
  for (const auto& segment : segments) {
    std::memcpy(out, segment.begin(), segment.size() * bytes_per_word);
    out += segment.size() * bytes_per_word;
  }
}

const void* MessageStorage::data() const {
  return impl_->segments.empty() ? nullptr : impl_->segments.front().begin();
}

std::string render_struct(capnp::DynamicStruct::Reader reader) {
  try {
    return std::string(kj::str(reader).cStr());
  } catch (const kj::Exception& e) {
    return "<unprintable message: " + describe(e) + ">";
  }
}

}  // namespace brigade::detail
