// Plan text: one "key=value" a line; parts as "member:first:count" separated by commas.
#include "launch_rounds.hpp"

#include <chrono>
#include <sstream>

#include "tessera/core/error.hpp"

namespace tessera::tools::rounds {

std::string Plan::encode() const {
  std::ostringstream o;
  o.precision(17);
  o << "port=" << port << "\nworld=" << world << "\nheartbeat_ms=" << heartbeat_ms
    << "\nround=" << figures.round << "\nrestarts=" << figures.restarts
    << "\nmax_restarts=" << figures.max_restarts << "\nmembers=" << figures.members
    << "\ntime_lost_s=" << figures.time_lost_s
    << "\nsteps_lost=" << figures.steps_lost << "\nparts=";
  for (std::size_t i = 0; i < parts.size(); ++i)
    o << (i ? "," : "") << parts[i].member << ':' << parts[i].first << ':' << parts[i].count;
  o << "\n";
  return o.str();
}

Plan Plan::decode(const std::string& text) {
  Plan p;
  std::istringstream in(text);
  std::string line;
  int seen = 0;
  try {
    while (std::getline(in, line)) {
      const auto eq = line.find('=');
      TESSERA_CHECK(eq != std::string::npos, "no '='");
      const std::string k = line.substr(0, eq), v = line.substr(eq + 1);
      ++seen;
      if (k == "port")
        p.port = std::stoi(v);
      else if (k == "world")
        p.world = std::stoi(v);
      else if (k == "heartbeat_ms")
        p.heartbeat_ms = std::stoi(v);
      else if (k == "round")
        p.figures.round = std::stoi(v);
      else if (k == "restarts")
        p.figures.restarts = std::stoi(v);
      else if (k == "max_restarts")
        p.figures.max_restarts = std::stoi(v);
      else if (k == "members")
        p.figures.members = std::stoi(v);
      else if (k == "time_lost_s")
        p.figures.time_lost_s = std::stod(v);
      else if (k == "steps_lost")
        p.figures.steps_lost = std::stoll(v);
      else if (k == "parts") {
        std::istringstream ps(v);
        std::string item;
        while (std::getline(ps, item, ',')) {
          Part part;
          char c1 = 0, c2 = 0;
          std::istringstream is(item);
          is >> part.member >> c1 >> part.first >> c2 >> part.count;
          TESSERA_CHECK(is && c1 == ':' && c2 == ':', "part '", item, "'");
          p.parts.push_back(part);
        }
      } else {
        --seen;
      }
    }
  } catch (const std::exception& e) {
    throw InvalidArgument(detail::cat("elastic round plan '", text, "' is malformed (", e.what(),
                                      "); every launcher of a job must be the same tessera"));
  }
  TESSERA_CHECK(seen == 10 && p.world > 0, "elastic round plan '", text,
                "' is incomplete; every launcher of a job must be the same tessera");
  return p;
}

const Plan::Part* Plan::part_of(int member) const {
  for (const auto& part : parts)
    if (part.member == member) return &part;
  return nullptr;
}

std::string join_words(const std::vector<std::string>& words) {
  std::string s;
  for (std::size_t i = 0; i < words.size(); ++i) s += (i ? "\x1f" : "") + words[i];
  return s;
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::size_t start = 0;
  for (;;) {
    const auto end = text.find('\x1f', start);
    words.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return words;
    start = end + 1;
  }
}

std::vector<std::string> rank_env(const std::vector<std::string>& base, const Plan& plan,
                                  const Plan::Part& part, int local, const std::string& master_addr,
                                  const std::string& token) {
  std::vector<std::string> env = base;
  for (auto kv : {detail::cat("RANK=", part.first + local), detail::cat("WORLD_SIZE=", plan.world),
                  detail::cat("LOCAL_RANK=", local), detail::cat("LOCAL_WORLD_SIZE=", part.count),
                  "MASTER_ADDR=" + master_addr, detail::cat("MASTER_PORT=", plan.port),
                  "TESSERA_RDZV_TOKEN=" + token, std::string("TESSERA_RDZV_HOSTED=1"),
                  detail::cat("TESSERA_HEARTBEAT_MS=", plan.heartbeat_ms)})
    env.push_back(kv);
  for (auto& kv : run::elastic_env(plan.figures)) env.push_back(kv);
  return env;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace tessera::tools::rounds
