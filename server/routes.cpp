#include "server/routes.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "models/image.h"
#include "server/harmony_parser.h"
#include "server/lora_models.h"
#include "server/openai_format.h"
#include "server/responses_request.h"

namespace brigade::server {

namespace {

bool authorized(const ServerContext& ctx, std::string_view authorization) {
  if (ctx.options.api_key.empty()) return true;
  const std::string want = "Bearer " + ctx.options.api_key;
  return authorization == want;
}

Expected<std::string> render_chat(const ServerContext& ctx, const CompletionRequest& r);

// A pooling request's chat form, rendered by the chat template into its one text input.
Status render_pooling_chat(const ServerContext& ctx, const std::optional<CompletionRequest>& chat,
                           std::vector<PromptInput>& inputs) {
  if (!chat) return Status::ok();
  BRIGADE_ASSIGN_OR_RETURN(std::string text, render_chat(ctx, *chat));
  inputs = {PromptInput{std::move(text), {}}};
  return Status::ok();
}

// vLLM's routes (no /v1 prefix, so no API key, as there), answered from the engine's tokenizer on
// the connection's thread. /tokenize's chat form renders the messages as a chat completion would.
SimpleResponse tokenize_route(ServerContext& ctx, std::string_view body, bool detokenize) {
  auto fail = [](const Status& st) { return error_response(http_status_for(st.code()), st.message(), st.code()); };
  if (detokenize) {
    auto ids = parse_detokenize_body(body);
    if (!ids) return fail(ids.status());
    auto text = ctx.engine.detokenize(*ids);
    if (!text) return error_response(400, text.status().message(), text.status().code());
    return SimpleResponse{200, "application/json", detokenize_body(*text)};
  }
  auto req = parse_tokenize_body(body);
  if (!req) return fail(req.status());
  if (req->chat) {
    auto text = render_chat(ctx, *req->chat);
    if (!text) return error_response(400, text.status().message(), text.status().code());
    req->prompt = std::move(*text);
  }
  auto ids = ctx.engine.tokenize(req->prompt, req->add_special_tokens);
  if (!ids) return error_response(400, ids.status().message(), ids.status().code());
  std::optional<std::vector<std::string>> strs;
  if (req->return_token_strs) {
    auto got = ctx.engine.token_strings(*ids);
    if (!got) return error_response(400, got.status().message(), got.status().code());
    strs = std::move(*got);
  }
  return SimpleResponse{200, "application/json",
                        tokenize_body(*ids, ctx.engine.model().max_context, strs ? &*strs : nullptr)};
}

// The value of query parameter `name` in the request target ("/path?a=1&b=2"); nullopt when absent.
std::optional<std::string_view> query_param(std::string_view target, std::string_view name) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

// vLLM's POST /reset_prefix_cache and SGLang's /flush_cache: Engine::reset_prefix_cache, the
// disk tiers too with `?disk=true`. 200 with what was dropped; 400 for a bad `disk`; 500 naming
// what could not be reset (the rest was).
SimpleResponse cache_reset_route(ServerContext& ctx, std::string_view target) {
  bool disk = false;
  if (auto d = query_param(target, "disk")) {
    if (*d != "true" && *d != "false")
      return error_response(400, "disk=" + std::string(*d) + ": expected true or false", StatusCode::invalid_argument);
    disk = *d == "true";
  }
  auto r = ctx.engine.reset_prefix_cache(disk);
  if (!r) return error_response(http_status_for(r.status().code()), r.status().message(), r.status().code());
  nlohmann::json body = {{"freed_pages", r->freed_pages},
                         {"kept_pages", r->kept_pages},
                         {"host_tier_pages", r->host_entries},
                         {"disk_tier_pages", r->disk_entries}};
  return SimpleResponse{200, "application/json", body.dump()};
}

// The chat's image parts as pixels (Engine::load_image, for a prompt of them all): data: URLs
// only, since the server fetches nothing; the model's own template wrote its image marker for each
// part.
Status load_images(ServerContext& ctx, CompletionRequest& r) {
  for (size_t i = 0; i < r.image_urls.size(); ++i) {
    const std::string& url = r.image_urls[i];
    const std::string at = "image " + std::to_string(i + 1) + " of the messages: ";
    if (!url.starts_with("data:"))
      return invalid_argument(at + "brigade fetches no URLs; send the image inline as a data: URL "
                                   "(data:image/png;base64,... or data:image/jpeg;base64,...)");
    auto bytes = decode_data_url(url);
    if (!bytes) return Status(bytes.status().code(), at + bytes.status().message());
    auto pixels = ctx.engine.load_image(*bytes, static_cast<int>(r.image_urls.size()));
    if (!pixels) return Status(pixels.status().code(), at + pixels.status().message());
    r.gen.images.push_back(std::move(*pixels));
  }
  return Status::ok();
}

// With tools: how this model writes calls (its chat template's tool syntax), and the constraint
// that forces one. A template whose call syntax brigade cannot parse refuses tools, and a history
// with tool calls or results: the calls would come back as plain text, and a template without a
// tool format may drop the results without a word (Llama 2's renders nothing for them).
Status setup_tools(ServerContext& ctx, CompletionRequest& r) {
  const bool tool_history = std::any_of(r.messages.begin(), r.messages.end(), [](const ChatTurn& m) {
    return m.role == "tool" || !m.tool_calls.empty();
  });
  if (r.tools.tools.empty() && !tool_history) return Status::ok();
  auto tmpl = ctx.engine.chat_template();
  if (!tmpl) return tmpl.status();
  const ChatToolSyntax syntax = ctx.tool_syntax.value_or(tmpl->tool_syntax());
  if (syntax == ChatToolSyntax::none)
    return unsupported("this model's chat template (" + tmpl->describe() +
                       ") has no tool-call format brigade parses, so tools, tool calls and tool results are refused; "
                       "they work with templates that write Hermes, Llama 3.1 JSON, Mistral, DeepSeek, GLM-4.5, "
                       "Kimi-K2, Granite, LFM2 or gpt-oss (harmony) calls, or name the syntax with "
                       "`brigade serve --tool-call-parser`");
  if (r.tools.tools.empty()) return Status::ok();
  r.tool_format = syntax;
  if (syntax == ChatToolSyntax::openai && r.tools.choice != ToolChoice::automatic && r.tools.choice != ToolChoice::none)
    return unsupported("tool_choice \"required\" or a named function is not supported with gpt-oss's harmony calls "
                       "(the constraint would have to wait for the commentary header); use tool_choice \"auto\"");
  // Tool-call markers are special tokens of many tokenizers (Mistral's [TOOL_CALLS], Cohere's
  // actions, Kimi-K2's sections, LFM2's and Jamba's, ...): the parser must see them, so with tools
  // offered the output keeps special tokens' text, as vLLM's chat serving does whatever the parser.
  if (r.tools.choice == ToolChoice::automatic) r.gen.skip_special_tokens = false;
  force_tool_choice(r.tools, r.tool_format, r.gen);
  return Status::ok();
}

// The server's default template variables, the request's reasoning_effort (as transformers passes
// it to gpt-oss's template) and documents, then the request's chat_template_kwargs over them, key
// by key, as vLLM merges them (the JSON texts, checked when read).
std::string template_kwargs(const std::string& defaults, const CompletionRequest& r) {
  const std::string& request = r.chat_template_kwargs;
  if (r.reasoning_effort.empty() && r.documents.empty() && (defaults.empty() || request.empty()))
    return defaults.empty() ? request : defaults;
  nlohmann::json merged = defaults.empty() ? nlohmann::json::object() : nlohmann::json::parse(defaults);
  if (!r.reasoning_effort.empty()) merged["reasoning_effort"] = r.reasoning_effort;
  if (!r.documents.empty()) merged["documents"] = nlohmann::json::parse(r.documents);
  if (!request.empty()) merged.update(nlohmann::json::parse(request));
  return merged.dump();
}

// The chat's prompt text, by the model's own chat template (brigade never guesses a format), or
// the request's chat_template when the server trusts it (vLLM's).
Expected<std::string> render_chat(const ServerContext& ctx, const CompletionRequest& r) {
  const std::string kwargs = template_kwargs(ctx.options.default_chat_template_kwargs, r);
  if (!r.chat_template.empty()) {
    if (!ctx.options.trust_request_chat_template)
      return invalid_argument("this request has its own chat_template, but the server does not render request "
                              "templates: start it with --trust-request-chat-template");
    BRIGADE_ASSIGN_OR_RETURN(ChatTemplate own, ctx.engine.compile_chat_template(r.chat_template));
    return ctx.engine.format_chat(r.messages, r.tools.tools, r.chat_ending, kwargs, &own);
  }
  auto prompt = ctx.engine.format_chat(r.messages, r.tools.tools, r.chat_ending, kwargs);
  if (!prompt && prompt.status().code() == StatusCode::not_found)
    return not_found("this model has no chat template: use /v1/completions with a prompt");
  return prompt;
}

// Harmony output (gpt-oss) is read from its special tokens' text, and ends at `<|return|>` or
// `<|call|>` (neither's text reaches the answer: the parser drops the markers).
void read_harmony(const ServerContext& ctx, CompletionRequest& r) {
  const bool calls = !r.tools.tools.empty() && r.tool_format == ChatToolSyntax::openai;
  if (r.reasoning != ReasoningKind::openai_gptoss && !calls) return;
  r.gen.skip_special_tokens = false;
  for (int32_t id : ctx.harmony_stop_ids)
    if (std::find(r.gen.stop_ids.begin(), r.gen.stop_ids.end(), id) == r.gen.stop_ids.end()) r.gen.stop_ids.push_back(id);
}

// Cohere's thinking and answer markers are special tokens of its tokenizer: the splitter reads
// them, and drops them with Cohere's other markers (vLLM's cohere reasoning parsers keep special
// tokens too); so are Mistral's [THINK] and [/THINK], Gemma 4's `<|channel>` and `<channel|>`,
// and ERNIE 4.5's `</think>`, `<response>` and `</response>` where its tokenizer makes them
// special tokens (vLLM's ernie45 parser reads them by id; the splitter here reads their text).
// Only while the output is split: separate_reasoning false leaves it as without a parser.
void keep_reasoning_markers(CompletionRequest& r) {
  if (r.reasoning == ReasoningKind::cohere_command || r.reasoning == ReasoningKind::mistral ||
      r.reasoning == ReasoningKind::ernie45 || r.reasoning == ReasoningKind::gemma4)
    r.gen.skip_special_tokens = false;
}

// The reasoning block the output may hold, as the ids the executor tracks it by: inside from the
// first token (the prompt left it open: reasoning_end_id alone), or opened only by a first
// `<think>` (with reasoning_start_id). False when no block can follow this prompt (it closed
// one, or the parser's markers are not single tokens).
bool delimit_block(const ServerContext& ctx, std::string_view prompt, GenerateOptions& gen) {
  if (ctx.think_close_id < 0) return false;
  const ReasoningStart start = reasoning_start(ctx.reasoning, prompt);
  if (start == ReasoningStart::reasoning) {
    gen.reasoning_end_id = ctx.think_close_id;
    return true;
  }
  if (start == ReasoningStart::maybe && ctx.think_open_id >= 0 && !prompt_closes_reasoning(prompt, ctx.reasoning)) {
    gen.reasoning_end_id = ctx.think_close_id;
    gen.reasoning_start_id = ctx.think_open_id;
    return true;
  }
  return false;
}

// With a reasoning parser, a constrained answer (response_format, guided_*, a forced tool call)
// comes after the reasoning, as vLLM and SGLang do: the constraint waits for `</think>` when the
// output may think (the prompt left the block open, or the model may open it with its first
// token). Returns how the output is split: none when `</think>` is not one token (the constraint
// then applies from the first token and the output stays whole, since it cannot hold a block).
// Harmony (gpt-oss): the constraint is the final channel's message: it waits for `<|message|>`
// shortly after `<|channel|>final` (vLLM's gpt-oss reasoning end), unless the prompt began that
// message itself.
ReasoningKind delay_constraint(const ServerContext& ctx, std::string_view prompt, GenerateOptions& gen) {
  if (ctx.reasoning == ReasoningKind::none || gen.response_format == ResponseFormat::text) return ctx.reasoning;
  if (ctx.reasoning == ReasoningKind::openai_gptoss) {
    // Without the header's ids the constraint applies from the first token; an output that is
    // then not harmony is all content (HarmonyParser).
    if (ctx.harmony_message_id < 0 || harmony_prompt_opens_final(prompt)) return ctx.reasoning;
    gen.reasoning_end_id = ctx.harmony_message_id;
    gen.reasoning_header_ids = ctx.harmony_final_header;
    return ctx.reasoning;
  }
  if (ctx.think_close_id < 0) return ReasoningKind::none;
  if (gen.reasoning_end_id < 0) delimit_block(ctx, prompt, gen);  // (limit_thinking may have read the prompt)
  return ctx.reasoning;
}

// vLLM's thinking_token_budget over the block the server's reasoning parser reads: refused
// without a parser whose close marker is one token (there is no block to cap, and a budget
// silently ignored is worse); nothing to cap when the prompt closed the block (Qwen3's
// enable_thinking=false). The forced close is ServerOptions::reasoning_end_str's tokens, or the
// close marker alone.
Status limit_thinking(const ServerContext& ctx, std::string_view prompt, GenerateOptions& gen) {
  if (gen.thinking_token_budget < 0) return Status::ok();
  if (ctx.reasoning == ReasoningKind::none)
    return invalid_argument("'thinking_token_budget' needs the server's reasoning parser (serve --reasoning-parser) "
                            "to find the reasoning block");
  if (ctx.reasoning == ReasoningKind::openai_gptoss)
    return unsupported("'thinking_token_budget' is not supported with gpt-oss's harmony channels (reasoning_effort "
                       "sets how long it thinks)");
  if (ctx.think_close_id < 0)
    return unsupported("'thinking_token_budget': the " + ctx.options.reasoning_parser +
                       " reasoning parser's closing marker is not one token of this model's tokenizer");
  if (!delimit_block(ctx, prompt, gen)) {
    gen.thinking_token_budget = -1;
    return Status::ok();
  }
  gen.thinking_end_ids = ctx.thinking_end_ids;
  return Status::ok();
}

}  // namespace

SimpleResponse error_response(int status, const std::string& message, StatusCode code) {
  return {status, "application/json", error_body(status, message, code)};
}

Routed route(ServerContext& ctx, const HttpRequestView& req) {
  std::string_view path = req.target.substr(0, req.target.find('?'));
  const bool get = req.method == "GET", post = req.method == "POST";
  if (path == "/ping") {  // SageMaker's health route, as vLLM serves it (GET or POST)
    if (!get && !post) return error_response(405, "/ping takes GET or POST", StatusCode::invalid_argument);
    return SimpleResponse{200, "application/json", "{}"};
  }
  if (path == "/version") {
    if (!get) return error_response(405, "/version takes GET", StatusCode::invalid_argument);
    return SimpleResponse{200, "application/json", "{\"version\":\"" BRIGADE_VERSION "\"}"};
  }
  if (path == "/health") {
    if (!get) return error_response(405, "/health takes GET", StatusCode::invalid_argument);
    return SimpleResponse{200, "application/json", "{\"status\":\"ok\"}"};
  }
  if (path == "/metrics") {
    if (!get) return error_response(405, "/metrics takes GET", StatusCode::invalid_argument);
    return SimpleResponse{200, "text/plain; version=0.0.4", ctx.metrics.render(ctx.engine.stats(), ctx.engine.instance_stats(),
                                                                    ctx.engine.station_stats())};
  }
  if (path == "/tokenize" || path == "/detokenize") {
    if (!post) return error_response(405, std::string(path) + " takes POST", StatusCode::invalid_argument);
    return tokenize_route(ctx, req.body, path == "/detokenize");
  }
  if (ctx.options.allow_cache_reset && (path == "/reset_prefix_cache" || path == "/flush_cache")) {
    // Not under /v1, yet it changes the server's state: the API key applies when one is set.
    if (!authorized(ctx, req.authorization))
      return error_response(401, "missing or wrong API key: send the header 'Authorization: Bearer <key>'",
                            StatusCode::invalid_argument);
    if (!post && !(get && path == "/flush_cache"))
      return error_response(405, std::string(path) + " takes POST", StatusCode::invalid_argument);
    return cache_reset_route(ctx, req.target);
  }
  // vLLM's scoring routes live outside /v1 too (/score, /rerank, /v2/rerank, /classify); the key
  // guards them all.
  const bool guarded = path.starts_with("/v1/") || path.starts_with("/v2/") || path == "/score" || path == "/rerank" ||
                       path == "/classify";
  if (guarded && !authorized(ctx, req.authorization)) {
    return error_response(401, "missing or wrong API key: send the header 'Authorization: Bearer <key>'",
                          StatusCode::invalid_argument);
  }
  if (path == "/v1/models") {
    if (!get) return error_response(405, "/v1/models takes GET", StatusCode::invalid_argument);
    return SimpleResponse{200, "application/json",
                          models_body_with_loras(ctx.options.model_name, ctx.created, ctx.engine.model().max_context,
                                                 ctx.engine.loras(), ctx.options.model_aliases)};
  }
  if (ctx.options.allow_runtime_lora_updating &&
      (path == "/v1/load_lora_adapter" || path == "/v1/unload_lora_adapter")) {
    if (!post) return error_response(405, std::string(path) + " takes POST", StatusCode::invalid_argument);
    return lora_update_route(ctx, req.body, path == "/v1/load_lora_adapter");
  }
  if (path == "/v1/embeddings") {
    if (!post) return error_response(405, "/v1/embeddings takes POST", StatusCode::invalid_argument);
    auto parsed = parse_embeddings_body(req.body);
    if (!parsed) return error_response(400, parsed.status().message(), parsed.status().code());
    if (Status st = render_pooling_chat(ctx, parsed->chat, parsed->inputs); !st.is_ok())
      return error_response(400, st.message(), st.code());
    if (parsed->truncate_prompt_tokens == -1) parsed->truncate_prompt_tokens = ctx.engine.model().max_context;
    return std::move(*parsed);
  }
  if (path == "/classify" || path == "/v1/classify") {
    if (!post) return error_response(405, std::string(path) + " takes POST", StatusCode::invalid_argument);
    auto parsed = parse_classify_body(req.body);
    if (!parsed) return error_response(400, parsed.status().message(), parsed.status().code());
    if (Status st = render_pooling_chat(ctx, parsed->chat, parsed->inputs); !st.is_ok())
      return error_response(400, st.message(), st.code());
    if (parsed->truncate_prompt_tokens == -1) parsed->truncate_prompt_tokens = ctx.engine.model().max_context;
    return std::move(*parsed);
  }
  const bool score = path == "/score" || path == "/v1/score";
  if (score || path == "/rerank" || path == "/v1/rerank" || path == "/v2/rerank") {
    if (!post) return error_response(405, std::string(path) + " takes POST", StatusCode::invalid_argument);
    auto parsed = score ? parse_score_body(req.body) : parse_rerank_body(req.body);
    if (!parsed) return error_response(400, parsed.status().message(), parsed.status().code());
    if (parsed->truncate_prompt_tokens == -1) parsed->truncate_prompt_tokens = ctx.engine.model().max_context;
    return std::move(*parsed);
  }
  const bool completions = path == "/v1/completions", chat = path == "/v1/chat/completions";
  const bool responses = path == "/v1/responses";
  if (!completions && !chat && !responses) {
    return error_response(404, "no route " + std::string(path) +
                                   " (valid: POST /v1/completions, POST /v1/chat/completions, POST /v1/responses, "
                                   "POST /v1/embeddings, POST /v1/score, POST /v1/rerank, POST /v2/rerank, POST /score, "
                                   "POST /rerank, POST /classify, POST /v1/classify, GET /v1/models, POST /tokenize, POST /detokenize, GET /health, "
                                   "GET /metrics, GET /version, GET|POST /ping" +
                                   std::string(ctx.options.allow_runtime_lora_updating
                                                   ? ", POST /v1/load_lora_adapter, POST /v1/unload_lora_adapter"
                                                   : "") +
                                   std::string(ctx.options.allow_cache_reset
                                                   ? ", POST /reset_prefix_cache, POST /flush_cache"
                                                   : "") +
                                   ")",
                          StatusCode::not_found);
  }
  if (!post) return error_response(405, std::string(path) + " takes POST", StatusCode::invalid_argument);
  if (Status refused = check_generates(ctx.engine.model()); !refused.is_ok())
    return error_response(400, refused.message(), refused.code());
  auto fail = [](const Status& st) { return error_response(http_status_for(st.code()), st.message(), st.code()); };
  Expected<CompletionRequest> parsed = invalid_argument("unreachable");
  ParseLimits limits;
  limits.defaults = ctx.options.generation_defaults;
  limits.max_logprobs = ctx.engine.model().max_logprobs;
  if (responses) {
    // The Responses API is a view of chat (server/responses_request.h).
    const auto body = nlohmann::ordered_json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) return fail(invalid_argument("the request body is not valid JSON"));
    auto as_chat = responses_to_chat(body);
    if (!as_chat) return fail(as_chat.status());
    parsed = parse_completion_body(as_chat->dump(), Endpoint::chat, limits);  // (its tools and schema in the body's order)
    if (parsed) {
      parsed->responses = true;
      parsed->responses_echo = responses_echo(body).dump();
    }
  } else {
    parsed = parse_completion_body(req.body, chat ? Endpoint::chat : Endpoint::completions, limits);
  }
  if (!parsed) return fail(parsed.status());
  if (!req.request_id.empty()) {
    if (Status st = check_request_id(req.request_id); !st.is_ok()) return fail(Status(st.code(), "X-Request-Id: " + st.message()));
    parsed->request_id = std::string(req.request_id);
  }
  const auto& aliases = ctx.options.model_aliases;  // another served name of the base model
  if (std::find(aliases.begin(), aliases.end(), parsed->model) != aliases.end()) parsed->model = ctx.options.model_name;
  if (auto st = select_lora(ctx.options.model_name, ctx.engine.loras(), ctx.engine.model().max_loras > 0, *parsed);
      !st.is_ok())
    return fail(st);  // (404 for a name not served, as vLLM's)
  if (parsed->gen.truncate_prompt_tokens == -1) parsed->gen.truncate_prompt_tokens = ctx.engine.model().max_context;
  if (!parsed->return_tokens_as_token_ids) parsed->return_tokens_as_token_ids = ctx.options.return_tokens_as_token_ids;
  if (parsed->echo && parsed->endpoint == Endpoint::chat) {
    // vLLM's chat echo: the last message's text starts the content when it is the assistant's.
    if (!parsed->messages.empty() && parsed->messages.back().role == "assistant")
      parsed->echo_texts.push_back(parsed->messages.back().content);
  } else if (parsed->echo) {
    for (const PromptInput& p : parsed->prompts) {
      if (p.ids.empty()) {
        parsed->echo_texts.push_back(p.text);
        continue;
      }
      auto text = ctx.engine.detokenize(p.ids);
      if (!text) return error_response(400, "'prompt': " + text.status().message(), text.status().code());
      parsed->echo_texts.push_back(std::move(*text));
    }
  }
  if (parsed->endpoint == Endpoint::chat) {
    auto prompt = render_chat(ctx, *parsed);
    if (!prompt) return error_response(400, prompt.status().message(), prompt.status().code());
    if (auto st = load_images(ctx, *parsed); !st.is_ok()) return error_response(400, st.message(), st.code());
    if (auto st = setup_tools(ctx, *parsed); !st.is_ok()) return error_response(400, st.message(), st.code());
    if (auto st = limit_thinking(ctx, *prompt, parsed->gen); !st.is_ok()) return fail(st);
    const ReasoningKind kind = delay_constraint(ctx, *prompt, parsed->gen);
    parsed->reasoning = parsed->separate_reasoning ? kind : ReasoningKind::none;
    read_harmony(ctx, *parsed);
    keep_reasoning_markers(*parsed);
    parsed->gen.prompt = std::move(*prompt);
    parsed->gen.prompt_ids.clear();
    // The template carries the BOS marker; add_special_tokens (parse: false unless asked) adds
    // the tokenizer's on top of it, as vLLM's.
  }
  return std::move(*parsed);
}

}  // namespace brigade::server
