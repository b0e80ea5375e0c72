// `brigade serve`: the OpenAI-compatible HTTP server (server/http_server.h) over one engine.
// SIGINT/SIGTERM stop it gracefully: no new connections, requests in flight cancelled and their
// pages freed, then the engine shuts down.
#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <pthread.h>

#include <nlohmann/json.hpp>

#include "models/chat_template.h"
#include "server/http_server.h"
#include "server/reasoning_parser.h"
#include "server/stats_logger.h"
#include "tools/commands.h"

namespace brigade::tools {

namespace {

struct ServeArgs {
  std::string model;
  std::string model_tag;  // vLLM's positional `serve MODEL`, the same as --model
  std::string tokenizer;  // vLLM's --tokenizer (EngineOptions::tokenizer_path); empty: the model's
  std::string topology;
  bool launch_nodes = false;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::vector<std::string> served_model_names;  // vLLM's --served-model-name NAME [NAME ...]
  std::string chat_template;
  std::string reasoning_parser = "none";
  std::string reasoning_config;  // vLLM's --reasoning-config JSON (reasoning_end_str)
  std::string tool_call_parser;  // empty: the chat template's syntax
  bool enable_auto_tool_choice = false;  // vLLM's switch; brigade parses calls whenever tools are given
  std::string default_chat_template_kwargs;
  std::string pooling;    // empty: the model's (sentence-transformers files), else last
  std::string normalize;  // empty: the model's; true | false
  std::string hf_overrides;  // vLLM's --hf-overrides: the config.json keys that make a classifier
  int threads = 0;
  int io_threads = 2;
  ExecutorFlags executor;
  std::vector<std::string> lora_modules;  // name=path or {"name": ..., "path": ...}
  int max_loras = 8;
  int max_lora_rank = 16;
  bool enable_lora = false;  // LoRA slots even without --lora-modules (adapters loaded at run time)
  bool allow_runtime_lora_updating = false;  // or VLLM_ALLOW_RUNTIME_LORA_UPDATING=true|1
  bool allow_cache_reset = false;            // or VLLM_SERVER_DEV_MODE=1|true
  bool return_tokens_as_token_ids = false;
  bool trust_request_chat_template = false;
  std::string generation_config = "auto";  // vLLM's --generation-config: auto | vllm | DIR
  std::string override_generation_config;  // vLLM's --override-generation-config JSON
  std::optional<uint64_t> seed;            // vLLM's --seed (EngineOptions::seed)
  int max_logprobs = 20;                   // vLLM's --max-logprobs (EngineOptions::max_logprobs)
  bool disable_log_stats = false;          // vLLM's: no periodic stats line (server/stats_logger.h)
  bool enable_log_requests = false;        // vLLM's: a line per request started
  bool disable_log_requests = false;       // vLLM's older switch: requests are not logged unless enabled
  int max_log_len = 0;                     // vLLM's --max-log-len: the logged prompt cut to this (0: whole)
};

// vLLM's VLLM_LOG_STATS_INTERVAL: seconds between stats lines (10 by default); a malformed or
// non-positive value is refused by name.
Expected<double> stats_interval() {
  const char* v = std::getenv("VLLM_LOG_STATS_INTERVAL");
  if (v == nullptr || *v == 0) return 10.0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != 0 || !(s > 0.0) || s > 86400.0)
    return invalid_argument(std::string("VLLM_LOG_STATS_INTERVAL='") + v + "' is not a number of seconds in (0, 86400]");
  return s;
}

// vLLM's switch for the runtime adapter routes is an environment variable.
// Whether environment variable `name` is 1 or true (any case), as vLLM reads its switches.
bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  std::string s(v);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s == "1" || s == "true";
}

// vLLM's --reasoning-config: brigade takes the block's tags from --reasoning-parser, so of its keys
// reasoning_end_str (the text a spent thinking_token_budget forces) is what changes anything;
// reasoning_start_str is accepted when it is the parser's opening tag (HttpServer checks both
// once the parser is resolved).
Status read_reasoning_config(const std::string& text, server::ServerOptions& so) {
  if (text.empty()) return Status::ok();
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return invalid_argument("--reasoning-config must be a JSON object (e.g. '{\"reasoning_end_str\": \"</think>\"}')");
  for (const auto& [key, value] : j.items()) {
    if (key != "reasoning_end_str" && key != "reasoning_start_str")
      return invalid_argument("--reasoning-config: unknown key '" + key +
                              "' (brigade reads reasoning_start_str and reasoning_end_str; the block's tags come from "
                              "--reasoning-parser)");
    if (!value.is_string() || value.get<std::string>().empty())
      return invalid_argument("--reasoning-config: " + key + " must be a non-empty string");
    (key == "reasoning_end_str" ? so.reasoning_end_str : so.reasoning_start_str) = value.get<std::string>();
  }
  return Status::ok();
}

int run_serve(const ServeArgs& a) {
  const sigset_t stop_signals = block_stop_signals();
  // Before the model loads: a misspelt parser name should not cost a load.
  if (auto kind = server::parse_reasoning_kind(a.reasoning_parser); !kind)
    return fail(invalid_argument("--reasoning-parser: " + kind.status().message()));
  if (!a.tool_call_parser.empty()) {
    if (auto syntax = parse_tool_syntax(a.tool_call_parser); !syntax)
      return fail(invalid_argument("--tool-call-parser: " + syntax.status().message()));
  }
  server::ServerOptions so;
  if (Status st = read_reasoning_config(a.reasoning_config, so); !st.is_ok()) return fail(st);
  if (a.enable_log_requests && a.disable_log_requests)
    return fail(invalid_argument("--enable-log-requests and --disable-log-requests: give one"));
  auto interval = stats_interval();
  if (!interval) return fail(interval.status());
  if (!a.default_chat_template_kwargs.empty()) {
    const auto kwargs = nlohmann::json::parse(a.default_chat_template_kwargs, nullptr, /*allow_exceptions=*/false);
    if (kwargs.is_discarded() || !kwargs.is_object())
      return fail(invalid_argument("--default-chat-template-kwargs must be a JSON object (e.g. '{\"enable_thinking\": false}')"));
  }

  if (Status st = check_hf_overrides(a.hf_overrides); !st.is_ok()) return fail(st);
  std::optional<Pooling> pooling;
  if (!a.pooling.empty()) {
    auto p = parse_pooling(a.pooling);
    if (!p) return fail(invalid_argument("--pooling: " + p.status().message()));
    pooling = *p;
  }

  if (!a.model_tag.empty() && !a.model.empty() && a.model_tag != a.model)
    return fail(invalid_argument("the model is given twice, as '" + a.model_tag + "' and --model " + a.model + "; give one"));
  auto options = engine_options(a.topology, a.model.empty() ? a.model_tag : a.model, a.threads, /*default_model=*/true);
  if (!options) return fail(options.status());
  options->seed = a.seed;
  options->max_logprobs = a.max_logprobs;
  options->tokenizer_path = a.tokenizer;
  options->pooling = pooling;
  if (!a.normalize.empty()) options->normalize_embeddings = a.normalize == "true";
  options->hf_overrides = a.hf_overrides;
  const std::string* model = &options->model_path;
  if (Status st = apply_executor_flags(a.executor, *options); !st.is_ok()) return fail(st);
  for (const std::string& spec : a.lora_modules) {
    auto m = parse_lora_module(spec);
    if (!m) return fail(invalid_argument("--lora-modules: " + m.status().message()));
    options->lora_modules.push_back(std::move(*m));
  }
  options->max_loras = a.max_loras;
  options->max_lora_rank = a.max_lora_rank;
  options->enable_lora = a.enable_lora;
  const bool runtime_lora = a.allow_runtime_lora_updating || env_flag("VLLM_ALLOW_RUNTIME_LORA_UPDATING");
  if (runtime_lora && !options->lora_enabled())
    return fail(invalid_argument("runtime LoRA updating (--allow-runtime-lora-updating or "
                                 "VLLM_ALLOW_RUNTIME_LORA_UPDATING) needs --enable-lora (or --lora-modules)"));
  options->chat_template = a.chat_template;
  auto defaults = resolve_generation_defaults(*model, a.generation_config, a.override_generation_config);
  if (!defaults) return fail(defaults.status());
  so.generation_defaults = *defaults;
  if (!defaults->empty())  // as vLLM warns
    std::fprintf(stderr, "default sampling settings from %s: %s (a request's own values win; --generation-config vllm "
                 "for brigade's defaults)\n",
                 a.generation_config == "auto" || a.generation_config == "vllm" ? "the model's generation_config.json"
                                                                                : a.generation_config.c_str(),
                 defaults->describe().c_str());
  auto nodes = launch_nodes(a.launch_nodes, a.topology, *options, a.threads, a.executor);
  if (!nodes) return fail(nodes.status());
  auto engine = Engine::create(*options);
  if (!engine) return fail(engine.status());

  so.host = a.host;
  so.port = a.port;
  so.api_key = a.api_key;
  so.n_threads = a.io_threads;
  so.reasoning_parser = a.reasoning_parser;
  so.tool_call_parser = a.tool_call_parser;
  so.default_chat_template_kwargs = a.default_chat_template_kwargs;
  so.allow_runtime_lora_updating = runtime_lora;
  so.allow_cache_reset = a.allow_cache_reset || env_flag("VLLM_SERVER_DEV_MODE");
  so.return_tokens_as_token_ids = a.return_tokens_as_token_ids;
  so.trust_request_chat_template = a.trust_request_chat_template;
  so.model_name = a.served_model_names.empty() ? std::filesystem::path(*model).filename().string() : a.served_model_names.front();
  if (a.served_model_names.size() > 1) so.model_aliases.assign(a.served_model_names.begin() + 1, a.served_model_names.end());
  if (so.model_name.empty()) so.model_name = "brigade";
  if (a.enable_log_requests) {
    so.request_log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    so.max_log_len = a.max_log_len;
  }
  auto server = server::HttpServer::start(**engine, so);
  if (!server) return fail(server.status());
  std::unique_ptr<server::StatsLogger> stats_log;
  if (!a.disable_log_stats)
    stats_log = server::StatsLogger::start(**engine, *interval, [](const std::string& line) {
      std::fprintf(stderr, "%s\n", line.c_str());
    });
  const ModelSummary& summary = (*engine)->model();
  std::printf("serving %s as '%s' on http://%s:%d (POST %s/v1/embeddings%s%s; GET "
              "/v1/models, /health, /metrics)%s\n",
              model->c_str(), so.model_name.c_str(), a.host.c_str(), (*server)->port(),
              summary.generates ? "/v1/completions, /v1/chat/completions, " : "",
              summary.classifier ? ", /classify, /score, /rerank" : "",
              (std::string(runtime_lora ? ", /v1/load_lora_adapter, /v1/unload_lora_adapter" : "") +
               (so.allow_cache_reset ? ", /reset_prefix_cache, /flush_cache" : ""))
                  .c_str(),
              a.api_key.empty() ? "" : "; /v1 needs the API key");
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "%s: stopping (cancelling requests in flight)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  stats_log.reset();
  (*server)->stop();
  server->reset();   // before the engine it serves
  engine->reset();
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (completions, chat, models, metrics)");
  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("model", a->model_tag, "Checkpoint, as vLLM's `serve MODEL` (the same as --model)");
  cmd->add_option("--model", a->model, "Checkpoint (default: the synthetic 100M model, made when absent)");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "Tokenizer (and its chat template) from this directory or file instead of the model's (vLLM's flag: "
                  "a GGUF with its original Hugging Face tokenizer, a checkpoint that ships none)");
  cmd->add_option("--topology", a->topology, "Topology YAML");
  cmd->add_option("--host", a->host, "Address to bind (0.0.0.0 for every interface)")->capture_default_str();
  cmd->add_option("--port", a->port, "Port (0 = any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", a->api_key, "Require 'Authorization: Bearer KEY' on /v1/*");
  cmd->add_option("--served-model-name", a->served_model_names,
                  "Model id in responses (default: the model folder name); further names are accepted in requests and "
                  "listed by /v1/models, as vLLM's");
  cmd->add_option("--chat-template", a->chat_template,
                  "Chat template for /v1/chat/completions instead of the model's own: a Jinja file (as vLLM's), "
                  "or a built-in family (llama-2, llama-3, chatml, deepseek, harmony)");
  cmd->add_option("--reasoning-parser", a->reasoning_parser,
                  "Split <think> blocks of chat answers into reasoning_content: deepseek_r1, qwen3, deepseek_v3, glm45, "
                  "seed_oss, minimax_m2, minimax_m2_append_think (all content, <think> put first), cohere_command3 "
                  "and cohere_command4 (Cohere Command R7B / A's <|START_THINKING|> plans), mistral (Magistral's "
                  "and Ministral 3's [THINK] blocks), granite (Granite 3.2's \"Here is my thought process:\"), "
                  "hunyuan_a13b (<think>..</think><answer>..</answer>), ernie45 (ERNIE 4.5's <think> and <response>), "
                  "gemma4 (Gemma 4's <|channel>thought .. <channel|>), "
                  "glm47 and mimo (qwen3's rule), openai_gptoss (gpt-oss's harmony analysis channel), auto "
                  "(openai_gptoss when the vocabulary has a <|channel|> token, qwen3's rule when it has a </think> "
                  "token, seed_oss when </seed:think>, Cohere's when <|END_THINKING|>, mistral when [/THINK]) or none")
      ->capture_default_str();
  cmd->add_option("--reasoning-config", a->reasoning_config,
                  "vLLM's reasoning config as JSON: reasoning_end_str is what a request's thinking_token_budget "
                  "forces once spent (it must end with the reasoning parser's closing tag, e.g. "
                  "'{\"reasoning_end_str\": \"\\n\\nTime is up.\\n</think>\"}'); default: the closing tag alone");
  cmd->add_option("--tool-call-parser", a->tool_call_parser,
                  "How tool calls in chat answers are read (vLLM's names): hermes, llama3_json, mistral, deepseek_v3, "
                  "deepseek_v31, glm45 (glm47), qwen3_coder (qwen3_xml), seed_oss, minimax_m2, cohere_command3 "
                  "(cohere_command4), kimi_k2, pythonic "
                  "(llama4_pythonic), granite (Granite 3.x; granite4 is hermes), lfm2 (LFM2 / LFM2.5), jamba, hunyuan_a13b, phi4_mini_json, olmo3, "
                  "nemotron_nano_v2 (nemotron_json), apertus, ernie45, minimax (MiniMax-M1), gemma4 (Gemma 4), openai "
                  "(gpt-oss's harmony); default: the syntax the model's chat template writes");
  cmd->add_flag("--enable-auto-tool-choice", a->enable_auto_tool_choice,
                "Accepted for vLLM compatibility: tool_choice auto is always served when the chat template (or "
                "--tool-call-parser) has a call syntax");
  cmd->add_option("--default-chat-template-kwargs", a->default_chat_template_kwargs,
                  "Template variables for every chat, as a JSON object (e.g. '{\"enable_thinking\": false}'); a "
                  "request's chat_template_kwargs override them");
  cmd->add_option("--pooling", a->pooling,
                  "How /v1/embeddings pools the final hidden states: last (the last token), mean or cls (the first "
                  "token); default: the model dir's sentence-transformers modules.json + 1_Pooling/config.json, else last")
      ->check(CLI::IsMember({"last", "mean", "cls"}));
  cmd->add_option("--normalize-embeddings", a->normalize,
                  "L2-normalize embeddings: true or false (default: true when modules.json has a Normalize module or "
                  "there is no modules.json)")
      ->check(CLI::IsMember({"true", "false"}));
  cmd->add_option("--hf-overrides", a->hf_overrides,
                  "config.json keys laid over the model's, as vLLM's --hf-overrides, for the keys that make a "
                  "classifier of a checkpoint: e.g. '{\"architectures\": [\"Qwen3ForSequenceClassification\"], "
                  "\"classifier_from_token\": [\"no\", \"yes\"], \"is_original_qwen3_reranker\": true}' serves "
                  "Qwen3-Reranker on /score, /rerank and /classify");
  cmd->add_option("--threads", a->threads, "CPU threads for the executor (0 = all cores)");
  add_executor_flags(cmd, a->executor);
  add_launch_flag(cmd, a->launch_nodes);
  cmd->add_option("--lora-modules", a->lora_modules,
                  "LoRA adapters (PEFT directories) to serve: name=path ... or JSON {\"name\": ..., \"path\": ...}; "
                  "a request selects one by its name in `model`");
  cmd->add_flag("--enable-lora", a->enable_lora,
                "Keep --max-loras adapter slots, so adapters can be loaded while serving (--lora-modules enables "
                "LoRA too)");
  cmd->add_flag("--allow-runtime-lora-updating", a->allow_runtime_lora_updating,
                "Serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's "
                "VLLM_ALLOW_RUNTIME_LORA_UPDATING=true does the same); clients can then load any adapter path the "
                "server can read");
  cmd->add_flag("--allow-cache-reset", a->allow_cache_reset,
                "Serve POST /reset_prefix_cache (vLLM's, VLLM_SERVER_DEV_MODE=1 does the same) and GET/POST "
                "/flush_cache (SGLang's), which empty the prefix cache and HiCache tiers (?disk=true: the disk tier "
                "too); clients can then drop everything cached");
  cmd->add_flag("--trust-request-chat-template", a->trust_request_chat_template,
                "Render a chat request's own chat_template (vLLM's flag; otherwise such a request is refused with "
                "400: the template is code the server runs, in brigade's sandboxed Jinja interpreter)");
  cmd->add_flag("--return-tokens-as-token-ids", a->return_tokens_as_token_ids,
                "Logprobs name tokens 'token_id:N' unless a request's return_tokens_as_token_ids says otherwise "
                "(vLLM's flag: tokens that are not valid UTF-8 alone stay identifiable)");
  cmd->add_option("--max-loras", a->max_loras, "Most LoRA adapters loaded at once (all stay resident)")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--max-lora-rank", a->max_lora_rank, "Largest adapter rank r accepted")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--generation-config", a->generation_config,
                  "Request defaults for temperature, top_p, top_k, min_p, repetition_penalty and a max_tokens cap "
                  "(max_new_tokens): auto = the model's generation_config.json, vllm = none, or a directory holding one")
      ->capture_default_str();
  cmd->add_option("--override-generation-config", a->override_generation_config,
                  "JSON object over --generation-config's settings, e.g. '{\"temperature\": 0.5}'");
  cmd->add_option("--seed", a->seed,
                  "Seeds the draw of every request's seed that gives none (vLLM's flag): the same requests in the same "
                  "order after a restart sample the same tokens (default: a random seed at each start)");
  cmd->add_option("--max-logprobs", a->max_logprobs,
                  "Most top logprobs a request may ask for, logprobs / top_logprobs / prompt_logprobs (vLLM's flag; "
                  "-1 = the whole vocabulary)")
      ->capture_default_str()->check(CLI::Range(-1, 1 << 30));
  cmd->add_flag("--disable-log-stats", a->disable_log_stats,
                "No periodic stats line (vLLM's flag; otherwise every VLLM_LOG_STATS_INTERVAL seconds, 10 by default, "
                "while requests run: prompt and generation throughput, running and waiting requests, KV cache usage, "
                "prefix cache hit rate)");
  cmd->add_flag("--enable-log-requests", a->enable_log_requests,
                "A line on stderr for each request started: its id, prompt and sampling settings (vLLM's flag)");
  cmd->add_flag("--disable-log-requests", a->disable_log_requests,
                "Accepted for vLLM compatibility: requests are not logged unless --enable-log-requests");
  cmd->add_option("--max-log-len", a->max_log_len,
                  "Characters (or token ids) of a logged prompt (vLLM's flag; default: all of it)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--io-threads", a->io_threads, "HTTP I/O threads")->capture_default_str()->check(CLI::Range(1, 64));
  cmd->callback([a, &run] { run = [a] { return run_serve(*a); }; });
}

}  // namespace brigade::tools
