#include "server/responses_state.h"

#include <string_view>

namespace brigade::server {

namespace {

using json = nlohmann::ordered_json;

// The chat request run in stream mode, with the usage chunk, whatever the Responses body asked:
// its deltas are what the items are made of.
CompletionRequest as_chat_stream(CompletionRequest r) {
  r.stream = true;
  r.include_usage = true;
  return r;
}

// The JSON bodies of SSE text ("data: {...}\n\n" repeated); [DONE] is skipped.
std::vector<json> sse_bodies(std::string_view sse) {
  std::vector<json> out;
  constexpr std::string_view kData = "data: ";
  size_t pos = 0;
  while ((pos = sse.find(kData, pos)) != std::string_view::npos) {
    pos += kData.size();
    const size_t end = sse.find("\n\n", pos);
    const std::string_view body = sse.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    if (body != "[DONE]") out.push_back(json::parse(body));
    if (end == std::string_view::npos) break;
    pos = end;
  }
  return out;
}

}  // namespace

ResponsesState::ResponsesState(const CompletionRequest& request, std::string id, std::string model, int64_t created)
    : chat_(as_chat_stream(request), id, model, created),
      stream_(request.stream),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      echo_(request.responses_echo.empty() ? json::object() : json::parse(request.responses_echo)) {}

std::string ResponsesState::event(json e) {
  e["sequence_number"] = n_seq_++;
  const std::string type = e["type"];
  return "event: " + type + "\ndata: " + e.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string ResponsesState::on_event(int choice, const Event& ev) {
  std::string chunks = chat_.on_event(choice, ev);
  std::string out;
  if (stream_ && !started_) {
    started_ = true;
    out += event({{"type", "response.created"}, {"response", response_json("in_progress")}});
    out += event({{"type", "response.in_progress"}, {"response", response_json("in_progress")}});
  }
  if (ev.finish == FinishReason::error) {
    failed_ = Status(ev.error_code, ev.error);
    finish_ = FinishReason::error;
    return stream_ ? out : "";
  }
  for (const json& chunk : sse_bodies(chunks)) apply(chunk, out);
  if (chat_.done()) {
    for (const json& chunk : sse_bodies(chat_.stream_tail())) {
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        const json& u = chunk["usage"];
        usage_ = {{"input_tokens", u["prompt_tokens"]},
                  {"input_tokens_details", {{"cached_tokens", u["prompt_tokens_details"]["cached_tokens"]}}},
                  {"output_tokens", u["completion_tokens"]},
                  {"total_tokens", u["total_tokens"]}};
      }
    }
  }
  return stream_ ? out : "";
}

void ResponsesState::apply(const json& chunk, std::string& out) {
  if (!chunk.contains("choices") || chunk["choices"].empty()) return;
  const json& choice = chunk["choices"][0];
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    const std::string f = choice["finish_reason"];
    finish_ = f == "length" ? FinishReason::length : f == "abort" ? FinishReason::abort : FinishReason::stop;
  }
  const json& delta = choice["delta"];
  if (delta.contains("reasoning_content") && delta["reasoning_content"].is_string()) {
    const std::string piece = delta["reasoning_content"];
    Item& item = item_for(Kind::reasoning, out);
    item.text += piece;
    if (stream_) {
      out += event({{"type", "response.reasoning_text.delta"}, {"item_id", item.id},
                    {"output_index", items_.size() - 1}, {"content_index", 0}, {"delta", piece}});
    }
  }
  if (delta.contains("content") && delta["content"].is_string() && !delta["content"].get<std::string>().empty()) {
    const std::string piece = delta["content"];
    Item& item = item_for(Kind::message, out);
    item.text += piece;
    if (stream_) {
      out += event({{"type", "response.output_text.delta"}, {"item_id", item.id}, {"output_index", items_.size() - 1},
                    {"content_index", 0}, {"delta", piece}, {"logprobs", json::array()}});
    }
  }
  if (delta.contains("tool_calls")) {
    for (const json& call : delta["tool_calls"]) {
      const json& fn = call["function"];
      if (call.contains("id")) {  // a new call: its id and name come with its first piece
        close_item(out);
        Item item;
        item.kind = Kind::function_call;
        item.id = "fc_" + id_.substr(id_.find('_') + 1) + "_" + std::to_string(items_.size());
        item.call_id = call["id"];
        item.name = fn.value("name", "");
        items_.push_back(std::move(item));
        if (stream_) {
          out += event({{"type", "response.output_item.added"}, {"output_index", items_.size() - 1},
                        {"item", item_json(items_.back())}});
        }
      }
      if (items_.empty() || items_.back().kind != Kind::function_call) continue;  // CompletionState never does this
      Item& item = items_.back();
      const std::string piece = fn.value("arguments", "");
      if (piece.empty()) continue;
      item.text += piece;
      if (stream_) {
        out += event({{"type", "response.function_call_arguments.delta"}, {"item_id", item.id},
                      {"output_index", items_.size() - 1}, {"delta", piece}});
      }
    }
  }
}

ResponsesState::Item& ResponsesState::item_for(Kind kind, std::string& out) {
  if (!items_.empty() && !items_.back().done && items_.back().kind == kind) return items_.back();
  close_item(out);
  Item item;
  item.kind = kind;
  const char* prefix = kind == Kind::reasoning ? "rs_" : "msg_";
  item.id = prefix + id_.substr(id_.find('_') + 1) + "_" + std::to_string(items_.size());
  items_.push_back(std::move(item));
  if (stream_) {
    const size_t index = items_.size() - 1;
    out += event({{"type", "response.output_item.added"}, {"output_index", index}, {"item", item_json(items_.back())}});
    if (kind == Kind::message) {
      out += event({{"type", "response.content_part.added"}, {"item_id", items_.back().id}, {"output_index", index},
                    {"content_index", 0},
                    {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
    }
  }
  return items_.back();
}

void ResponsesState::close_item(std::string& out) {
  if (items_.empty() || items_.back().done) return;
  Item& item = items_.back();
  item.done = true;
  if (!stream_) return;
  const size_t index = items_.size() - 1;
  switch (item.kind) {
    case Kind::reasoning:
      out += event({{"type", "response.reasoning_text.done"}, {"item_id", item.id}, {"output_index", index},
                    {"content_index", 0}, {"text", item.text}});
      break;
    case Kind::message: {
      json part = {{"type", "output_text"}, {"text", item.text}, {"annotations", json::array()}};
      out += event({{"type", "response.output_text.done"}, {"item_id", item.id}, {"output_index", index},
                    {"content_index", 0}, {"text", item.text}, {"logprobs", json::array()}});
      out += event({{"type", "response.content_part.done"}, {"item_id", item.id}, {"output_index", index},
                    {"content_index", 0}, {"part", std::move(part)}});
      break;
    }
    case Kind::function_call:
      out += event({{"type", "response.function_call_arguments.done"}, {"item_id", item.id}, {"output_index", index},
                    {"name", item.name}, {"arguments", item.text}});
      break;
  }
  out += event({{"type", "response.output_item.done"}, {"output_index", index}, {"item", item_json(item)}});
}

json ResponsesState::item_json(const Item& item) const {
  // An item open while the response is still running is in progress; the last one of a response
  // cut by max_output_tokens is incomplete.
  const bool last = !items_.empty() && &item == &items_.back();
  const std::string status = !item.done ? "in_progress" : last && finish_ == FinishReason::length ? "incomplete" : "completed";
  switch (item.kind) {
    case Kind::reasoning: {
      json content = json::array();
      if (item.done) content.push_back({{"type", "reasoning_text"}, {"text", item.text}});
      return {{"id", item.id}, {"type", "reasoning"}, {"summary", json::array()}, {"content", std::move(content)},
              {"status", status}};
    }
    case Kind::message: {
      json content = json::array();
      if (item.done)
        content.push_back({{"type", "output_text"}, {"text", item.text}, {"annotations", json::array()},
                           {"logprobs", json::array()}});
      return {{"id", item.id}, {"type", "message"}, {"status", status}, {"role", "assistant"},
              {"content", std::move(content)}};
    }
    case Kind::function_call:
      return {{"id", item.id}, {"type", "function_call"}, {"status", status}, {"call_id", item.call_id},
              {"name", item.name}, {"arguments", item.done ? item.text : ""}};
  }
  return json::object();
}

std::string ResponsesState::status() const {
  switch (finish_) {
    case FinishReason::length: return "incomplete";
    case FinishReason::abort: return "cancelled";
    case FinishReason::error: return "failed";
    default: return "completed";
  }
}

json ResponsesState::response_json(const std::string& status) const {
  json output = json::array();
  if (status != "in_progress") {
    for (const Item& item : items_) output.push_back(item_json(item));
  }
  json r = {{"id", id_}, {"object", "response"}, {"created_at", created_}, {"status", status}};
  r["error"] = status == "failed" ? json{{"code", status_code_name(failed_.code())}, {"message", failed_.message()}}
                                  : json(nullptr);
  r["incomplete_details"] = status == "incomplete" ? json{{"reason", "max_output_tokens"}} : json(nullptr);
  for (const char* key : {"instructions", "max_output_tokens"}) r[key] = echo_.value(key, json(nullptr));
  r["model"] = model_;
  r["output"] = std::move(output);
  r["parallel_tool_calls"] = echo_.value("parallel_tool_calls", json(true));
  r["previous_response_id"] = nullptr;
  r["reasoning"] = echo_.value("reasoning", json(nullptr));
  r["store"] = false;  // brigade keeps no responses
  for (const char* key : {"temperature", "text", "tool_choice", "tools", "top_p"}) r[key] = echo_.value(key, json(nullptr));
  r["truncation"] = "disabled";
  r["usage"] = status == "in_progress" || usage_.is_null() ? json(nullptr) : usage_;
  r["user"] = echo_.value("user", json(nullptr));
  r["metadata"] = echo_.value("metadata", json::object());
  return r;
}

std::string ResponsesState::final_body() const {
  json r = response_json(status());
  // Non-stream: every item is whole (close_item only marks them done).
  json output = json::array();
  for (Item item : items_) {
    item.done = true;
    output.push_back(item_json(item));
  }
  if (!output.empty() && finish_ == FinishReason::length) output.back()["status"] = "incomplete";
  r["output"] = std::move(output);
  return r.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ResponsesState::stream_tail() {
  if (finish_ == FinishReason::error) return "";  // stream_error ended it
  std::string out;
  close_item(out);
  const std::string s = status();
  const char* type = s == "incomplete" ? "response.incomplete" : "response.completed";
  out += event({{"type", type}, {"response", response_json(s)}});
  return out;
}

std::string ResponsesState::stream_error(const Event& ev) {
  failed_ = Status(ev.error_code, ev.error);
  finish_ = FinishReason::error;
  std::string out;
  close_item(out);
  out += event({{"type", "error"}, {"code", status_code_name(ev.error_code)}, {"message", ev.error}, {"param", nullptr}});
  out += event({{"type", "response.failed"}, {"response", response_json("failed")}});
  return out;
}

}  // namespace brigade::server
