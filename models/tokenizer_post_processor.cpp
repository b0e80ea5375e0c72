#include "models/tokenizer_post_processor.h"

namespace brigade {

using json = nlohmann::json;

Expected<PostProcessor> PostProcessor::parse(const json& post, int n_vocab, const std::string& origin) {
  PostProcessor p;
  BRIGADE_RETURN_IF_ERROR(p.add(post, n_vocab, origin));
  return p;
}

Status PostProcessor::add(const json& post, int n_vocab, const std::string& origin) {
  if (post.is_null()) return Status::ok();
  const std::string type = post.is_object() ? post.value("type", "") : "";
  auto bad = [&](const std::string& why) { return corrupt(origin + ": post_processor " + why + ": " + post.dump().substr(0, 200)); };
  if (type == "Sequence") {
    if (!post.contains("processors") || !post["processors"].is_array()) return bad("Sequence has no processors");
    for (const auto& p : post["processors"]) BRIGADE_RETURN_IF_ERROR(add(p, n_vocab, origin));
    return Status::ok();
  }
  if (type == "ByteLevel") return Status::ok();
  if (templated_) return bad("has two templates");
  if (type == "TemplateProcessing") return add_template(post, n_vocab, origin);
  if (type != "BertProcessing" && type != "RobertaProcessing")
    return unsupported(origin + ": post_processor type '" + type +
                       "' is not supported (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence)");
  auto id_of = [&](const json& v) -> Expected<int32_t> {  // ["[CLS]", 101]
    if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer()) return bad("names a token as [text, id]");
    const int64_t id = v[1].get<int64_t>();
    if (id < 0 || id >= n_vocab) return bad("token id " + std::to_string(id) + " is outside the vocabulary");
    return static_cast<int32_t>(id);
  };
  BRIGADE_ASSIGN_OR_RETURN(int32_t cls, id_of(post.value("cls", json())));
  BRIGADE_ASSIGN_OR_RETURN(int32_t sep, id_of(post.value("sep", json())));
  prefix_ = {cls};
  suffix_ = {sep};
  // RoBERTa has no second segment embedding: every type id is 0.
  pair_ = type == "BertProcessing"
              ? std::vector<Item>{{cls, 0}, {kSequenceA, 0}, {sep, 0}, {kSequenceB, 1}, {sep, 1}}
              : std::vector<Item>{{cls, 0}, {kSequenceA, 0}, {sep, 0}, {sep, 0}, {kSequenceB, 0}, {sep, 0}};
  templated_ = true;
  return Status::ok();
}

// TemplateProcessing: `single` and `pair` are lists of {"Sequence": {"id": "A", "type_id": 0}}
// and {"SpecialToken": {"id": "[SEP]", "type_id": 1}}, the special tokens' ids in special_tokens.
Status PostProcessor::add_template(const json& post, int n_vocab, const std::string& origin) {
  auto bad = [&](const std::string& why) { return corrupt(origin + ": post_processor " + why + ": " + post.dump().substr(0, 200)); };
  const json& single = post.value("single", json());
  const json& specials = post.value("special_tokens", json::object());
  if (!single.is_array() || !specials.is_object()) return bad("TemplateProcessing has no single template");
  // A template item that is not a Sequence: its special token's ids, appended to `out`.
  auto append_special = [&](const json& item, const std::string& which, std::vector<Item>& out) -> Status {
    if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object())
      return bad(which + " template item is neither a Sequence nor a SpecialToken");
    const std::string name = item["SpecialToken"].value("id", "");
    const int32_t type_id = item["SpecialToken"].value("type_id", 0);
    if (!specials.contains(name) || !specials[name].is_object() || !specials[name].contains("ids") ||
        !specials[name]["ids"].is_array())
      return bad("special token '" + name + "' has no ids");
    for (const auto& id : specials[name]["ids"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n_vocab)
        return bad("special token '" + name + "' has an id outside the vocabulary");
      out.push_back({id.get<int32_t>(), type_id});
    }
    return Status::ok();
  };
  bool seen_a = false;
  std::vector<Item> before, after;
  for (const auto& item : single) {
    if (item.is_object() && item.contains("Sequence")) {
      if (seen_a || item["Sequence"].value("id", "") != "A") return bad("single template holds one sequence, $A");
      seen_a = true;
      continue;
    }
    BRIGADE_RETURN_IF_ERROR(append_special(item, "single", seen_a ? after : before));
  }
  if (!seen_a) return bad("single template has no $A");
  for (const Item& i : before) prefix_.push_back(i.id);
  for (const Item& i : after) suffix_.push_back(i.id);
  templated_ = true;
  const json& pair = post.value("pair", json());
  if (pair.is_null()) return Status::ok();
  if (!pair.is_array()) return bad("pair template is not a list");
  int n_a = 0, n_b = 0;
  for (const auto& item : pair) {
    if (item.is_object() && item.contains("Sequence")) {
      const std::string which = item["Sequence"].value("id", "");
      if (which != "A" && which != "B") return bad("pair template names a sequence other than $A and $B");
      (which == "A" ? n_a : n_b) += 1;
      pair_.push_back({which == "A" ? kSequenceA : kSequenceB, item["Sequence"].value("type_id", 0)});
      continue;
    }
    BRIGADE_RETURN_IF_ERROR(append_special(item, "pair", pair_));
  }
  if (n_a != 1 || n_b != 1) return bad("pair template must hold $A and $B once each");
  return Status::ok();
}

std::vector<int32_t> PostProcessor::single(std::span<const int32_t> ids) const {
  std::vector<int32_t> out = prefix_;
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

Expected<std::vector<int32_t>> PostProcessor::pair(std::span<const int32_t> a, std::span<const int32_t> b,
                                                   std::vector<int32_t>* type_ids) const {
  // Without a post-processor Hugging Face joins the two encodings, the second of type 1.
  static const std::vector<Item> kJoined = {{kSequenceA, 0}, {kSequenceB, 1}};
  if (templated_ && pair_.empty())
    return unsupported("this tokenizer's post-processor has no pair template: it cannot encode a pair of texts");
  std::vector<int32_t> out, types;
  for (const Item& item : templated_ ? pair_ : kJoined) {
    std::span<const int32_t> part = item.id == kSequenceA ? a : item.id == kSequenceB ? b : std::span<const int32_t>();
    if (item.id >= 0) out.push_back(item.id);
    out.insert(out.end(), part.begin(), part.end());
    types.resize(out.size(), item.type_id);
  }
  if (type_ids) *type_ids = std::move(types);
  return out;
}

}  // namespace brigade
