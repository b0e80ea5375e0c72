// Fault test (issue 5): `brigade serve` with a write-through disk tier is SIGKILLed while it is
// writing pages to RocksDB, then restarted on the same directory. The restarted server must come
// back, serve the earlier prefixes from disk, and never serve a damaged page: its outputs equal
// those of an engine without any cache.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fcntl.h>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "brigade/engine.h"
#include "models/make_model.h"
#include "server/http_client.h"
#include "tests/engine_test_util.h"

extern char** environ;

namespace brigade {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The decimal number right after `prefix` in text; 0 when absent.
int number_after(const std::string& text, const std::string& prefix) {
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return 0;
  size_t i = at + prefix.size();
  int n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') n = n * 10 + (text[i++] - '0');
  return n;
}

// A `brigade serve` child process; its port is read from the line it prints when ready.
class ServerProcess {
 public:
  ServerProcess(const fs::path& model, const fs::path& topology, const fs::path& log) : log_(log) {
    const std::string bin = std::string(BRIGADE_BINARY_DIR) + "/tools/brigade";
    std::vector<std::string> args = {bin, "serve", "--model", model.string(), "--topology", topology.string(),
                                     "--port", "0", "--threads", "1"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    EXPECT_EQ(posix_spawn(&pid_, bin.c_str(), &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 600 && port_ == 0; ++i) {  // bounds the wait; nothing is timed
      std::ifstream in(log);
      std::stringstream ss;
      ss << in.rdbuf();
      port_ = number_after(ss.str(), "on http://127.0.0.1:");
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~ServerProcess() { kill(SIGKILL); }
  int port() const { return port_; }
  void kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

std::vector<int32_t> prompt_of(int k) {
  std::vector<int32_t> p;
  for (int i = 0; i < 64; ++i) p.push_back((i * 37 + k * 101) % 250 + 3);  // four pages of its own
  for (int i = 0; i < 5; ++i) p.push_back((i + k) % 250 + 3);
  return p;
}

// The completion's text, or "<error ...>" (never equal to a reference text).
std::string complete(int port, const std::vector<int32_t>& prompt) {
  const json body = {{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}};
  auto r = server::http_request("127.0.0.1", port, {"POST", "/v1/completions", body.dump(), ""});
  if (!r) return "<error " + r.status().to_string() + ">";
  if (r->status != 200) return "<error HTTP " + std::to_string(r->status) + ">";
  auto j = json::parse(r->body, nullptr, false);
  return j.is_discarded() ? "<error bad body>" : j["choices"][0].value("text", "<error no text>");
}

TEST(ServerRestart, KilledDuringDiskWritesComesBackWithoutServingDamage) {
  const fs::path dir = fs::temp_directory_path() / ("brigade_restart_fault_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ASSERT_TRUE(write_synthetic_model(testing::tiny_llama(300, 256, 11), (dir / "model").string()).is_ok());
  std::ofstream(dir / "topology.yaml") << "instances:\n  - name: main\n    cache: {radix: true, host_bytes: 0, disk_path: "
                                       << (dir / "tier").string() << ", write_policy: write_through}\n";
  constexpr int kPrompts = 40;

  // Reference: no cache at all.
  EngineOptions o = testing::test_engine_options((dir / "model").string(), 1);
  o.topology.instances.front().cache.radix = false;
  {
    // The first server: clients keep it writing pages to disk until it is killed.
    ServerProcess first(dir / "model", dir / "topology.yaml", dir / "first.log");
    ASSERT_GT(first.port(), 0) << "the server did not start";
    std::atomic<int> done{0};
    std::vector<std::future<void>> clients;
    for (int c = 0; c < 4; ++c) {
      clients.push_back(std::async(std::launch::async, [&, c] {
        for (int k = c; k < kPrompts; k += 4) {
          complete(first.port(), prompt_of(k));
          ++done;
        }
      }));
    }
    while (done < kPrompts / 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    first.kill(SIGKILL);  // mid-stream: pages of the running requests are being written
    for (auto& c : clients) c.wait();
  }
  ServerProcess second(dir / "model", dir / "topology.yaml", dir / "second.log");
  ASSERT_GT(second.port(), 0) << "the server did not come back";
  auto health = server::http_request("127.0.0.1", second.port(), {"GET", "/health", "", ""});
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->status, 200);
  auto reference = Engine::create(o);
  ASSERT_TRUE(reference.has_value()) << reference.status().to_string();
  for (int k = 0; k < kPrompts; ++k) {
    GenerateOptions g;
    g.prompt_ids = prompt_of(k);
    g.max_tokens = 6;
    g.sampling.temperature = 0.0f;
    g.ignore_eos = true;
    auto want = (*reference)->generate(g);
    ASSERT_TRUE(want.has_value());
    EXPECT_EQ(complete(second.port(), prompt_of(k)), want->text) << "prompt " << k;
  }
  auto metrics = server::http_request("127.0.0.1", second.port(), {"GET", "/metrics", "", ""});
  ASSERT_TRUE(metrics.has_value());
  EXPECT_GT(number_after(metrics->body, "\nbrigade_prefix_cache_loaded_tokens_total "), 0)
      << "prefixes written before the kill are served from disk";
  second.kill(SIGTERM);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace brigade
