#include "actors/node/node_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace brigade {

namespace {

using Clock = std::chrono::steady_clock;

std::string exit_text(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// One node's process and the thread that reads its output.
struct Child {
  std::string instance, endpoint;
  pid_t pid = -1;
  int restarts = 0;
  Clock::time_point started, restart_at;
  std::chrono::seconds backoff{1};
  std::thread reader;
  // Written by the reader thread, under Impl::mu_.
  bool ready = false, eof = false;
  std::deque<std::string> tail;  // its last lines, for errors
};

class Impl final : public NodeLauncher {
 public:
  explicit Impl(LaunchOptions o) : options_(std::move(o)) {}

  ~Impl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (supervisor_.joinable()) supervisor_.join();
    for (auto& c : children_)
      if (c->pid > 0) ::kill(c->pid, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    for (auto& c : children_) {
      if (c->pid <= 0) continue;
      int status = 0;
      while (::waitpid(c->pid, &status, WNOHANG) == 0) {
        if (Clock::now() > deadline) {
          spdlog::warn("launcher: node '{}' (pid {}) did not stop in 10 s; killing it", c->instance, c->pid);
          ::kill(c->pid, SIGKILL);
          ::waitpid(c->pid, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      c->pid = -1;
    }
    for (auto& c : children_)
      if (c->reader.joinable()) c->reader.join();
  }

  std::vector<Launched> nodes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Launched> out;
    for (const auto& c : children_) out.push_back({c->instance, c->endpoint, c->pid, c->restarts});
    return out;
  }

  Status start(const TopologyConfig& topology) {
    for (const auto& inst : topology.instances) {
      if (inst.remote.empty()) continue;
      BRIGADE_ASSIGN_OR_RETURN(Endpoint ep, parse_endpoint(inst.remote));
      if (!ep.loopback())
        return unsupported("instance '" + inst.name + "' is served at " + inst.remote +
                           ": launching starts nodes on this host only (a loopback endpoint); start that one "
                           "there: brigade node --topology FILE --instance " + inst.name);
      auto c = std::make_unique<Child>();
      c->instance = inst.name;
      c->endpoint = inst.remote;
      children_.push_back(std::move(c));
    }
    if (children_.empty())
      return invalid_argument("the topology names no remote instance: there is no node to launch");
    for (auto& c : children_) BRIGADE_RETURN_IF_ERROR(spawn(*c));
    const auto deadline = Clock::now() + options_.ready_timeout;
    std::unique_lock<std::mutex> lock(mu_);
    for (auto& c : children_) {
      cv_.wait_until(lock, deadline, [&] { return c->ready || c->eof; });
      if (c->ready) continue;
      std::string out;
      for (const auto& line : c->tail) out += "\n  " + line;
      const std::string what = c->eof ? "exited before it listened" : "did not listen within " +
                                                                        std::to_string(options_.ready_timeout.count()) + " s";
      return internal_error("node '" + c->instance + "' (" + options_.brigade + " node ... --instance " + c->instance +
                            ") " + what + (out.empty() ? "" : "; its last output:" + out));
    }
    lock.unlock();
    for (const auto& c : children_)
      spdlog::info("launcher: node '{}' listens at {} (pid {})", c->instance, c->endpoint, c->pid);
    if (options_.restart) supervisor_ = std::thread([this] { supervise(); });
    return Status::ok();
  }

 private:
  // Starts c's process and its reader thread.
  Status spawn(Child& c) {
    if (c.reader.joinable()) c.reader.join();  // the last process's output has ended (it was reaped)
    std::vector<std::string> args = {options_.brigade, "node", "--topology", options_.topology_file, "--instance",
                                     c.instance};
    args.insert(args.end(), options_.node_args.begin(), options_.node_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return io_error(std::string("launcher: pipe: ") + std::strerror(errno));
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      return io_error(std::string("launcher: fork: ") + std::strerror(errno));
    }
    if (pid == 0) {  // the child: async-signal-safe calls only until exec
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);  // the front died before prctl
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::close_range(3, ~0U, 0);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    {
      std::lock_guard<std::mutex> lock(mu_);
      c.pid = pid;
      c.ready = c.eof = false;
      c.tail.clear();
      c.started = Clock::now();
    }
    c.reader = std::thread([this, &c, fd = fds[0]] { read_output(c, fd); });
    return Status::ok();
  }

  // Forwards the node's output to stderr line by line; the first "node " line says it listens.
  void read_output(Child& c, int fd) {
    FILE* f = ::fdopen(fd, "r");
    if (!f) {
      ::close(fd);
      std::lock_guard<std::mutex> lock(mu_);
      c.eof = true;
      cv_.notify_all();
      return;
    }
    char* line = nullptr;
    size_t cap = 0;
    ssize_t n;
    while ((n = ::getline(&line, &cap, f)) > 0) {
      std::string text(line, static_cast<size_t>(n));
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
      std::fprintf(stderr, "[node %s] %s\n", c.instance.c_str(), text.c_str());
      std::lock_guard<std::mutex> lock(mu_);
      if (!c.ready && text.rfind("node ", 0) == 0) {
        c.ready = true;
        cv_.notify_all();
      }
      c.tail.push_back(std::move(text));
      if (c.tail.size() > 12) c.tail.pop_front();
    }
    std::free(line);
    std::fclose(f);
    std::lock_guard<std::mutex> lock(mu_);
    c.eof = true;
    cv_.notify_all();
  }

  // Reaps nodes that died and starts them again, with a back-off for those that die young.
  void supervise() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stopping_; });
      if (stopping_) break;
      const auto now = Clock::now();
      for (auto& c : children_) {
        if (c->pid > 0) {
          int status = 0;
          if (::waitpid(c->pid, &status, WNOHANG) != c->pid) continue;
          if (now - c->started > std::chrono::seconds(60)) c->backoff = std::chrono::seconds(1);
          spdlog::error("launcher: node '{}' (pid {}) stopped ({}); starting it again in {} s", c->instance, c->pid,
                        exit_text(status), c->backoff.count());
          c->pid = -1;
          c->restart_at = now + c->backoff;
          c->backoff = std::min(c->backoff * 2, std::chrono::seconds(30));
        } else if (now >= c->restart_at) {
          lock.unlock();
          const Status s = spawn(*c);
          lock.lock();
          if (!s.is_ok()) {
            spdlog::error("launcher: node '{}': {}", c->instance, s.message());
            c->restart_at = now + c->backoff;
            continue;
          }
          c->restarts++;
          spdlog::info("launcher: node '{}' started again (pid {})", c->instance, c->pid);
        }
      }
    }
  }

  LaunchOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Child>> children_;
  std::thread supervisor_;
};

}  // namespace

Expected<std::unique_ptr<NodeLauncher>> NodeLauncher::start(const TopologyConfig& topology, LaunchOptions options) {
  if (options.brigade.empty() || ::access(options.brigade.c_str(), X_OK) != 0)
    return not_found("the brigade executable '" + options.brigade + "' is not there to run the nodes");
  auto impl = std::make_unique<Impl>(std::move(options));
  BRIGADE_RETURN_IF_ERROR(impl->start(topology));  // on error, impl's destructor stops what started
  return std::unique_ptr<NodeLauncher>(std::move(impl));
}

}  // namespace brigade
