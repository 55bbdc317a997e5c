// StoreServer and StoreClient over comm::TcpStoreServer and comm::TcpStoreClient.
#include "tessera/run/launch.hpp"

#include "tessera/comm/tcp_store.hpp"

namespace tessera::run {

struct StoreServer::Impl {
  explicit Impl(comm::TcpStoreServer::Options o) : server(std::move(o)) {}
  comm::TcpStoreServer server;
};

struct StoreClient::Impl {
  explicit Impl(comm::TcpStoreClient::Options o) : client(std::move(o)) {}
  comm::TcpStoreClient client;
};

namespace {
comm::TcpStoreServer::Options server_options(StoreServer::Options o) {
  comm::TcpStoreServer::Options so;
  so.host = std::move(o.host);
  so.port = o.port;
  so.token = std::move(o.token);
  so.log = std::move(o.log);
  so.heartbeat_timeout = o.heartbeat_timeout;
  so.on_rank_lost = std::move(o.on_rank_lost);
  so.abort_on_rank_lost = o.abort_on_rank_lost;
  return so;
}

comm::TcpStoreClient::Options client_options(StoreClient::Options o) {
  comm::TcpStoreClient::Options co;
  co.host = std::move(o.host);
  co.port = o.port;
  co.token = std::move(o.token);
  co.rank = o.rank;
  co.connect_timeout = o.connect_timeout;
  co.heartbeat_interval = o.heartbeat_interval;
  return co;
}
}  // namespace

StoreServer::StoreServer(Options options)
    : impl_(std::make_unique<Impl>(server_options(std::move(options)))) {}

StoreServer::~StoreServer() = default;

int StoreServer::port() const noexcept { return impl_->server.port(); }

void StoreServer::abort(const std::string& reason) { impl_->server.abort(reason); }

std::string StoreServer::abort_reason() const { return impl_->server.abort_reason(); }

std::optional<std::string> StoreServer::get(const std::string& key) const {
  return impl_->server.get(key);
}

void StoreServer::set(const std::string& key, const std::string& value) {
  impl_->server.set(key, value);
}

std::set<int> StoreServer::ranks() const { return impl_->server.ranks(); }

StoreClient::StoreClient(Options options)
    : impl_(std::make_unique<Impl>(client_options(std::move(options)))) {}

StoreClient::~StoreClient() = default;

void StoreClient::set(const std::string& key, const std::string& value) {
  impl_->client.set(key, value);
}

std::string StoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  return impl_->client.get(key, timeout);
}

std::int64_t StoreClient::add(const std::string& key, std::int64_t delta) {
  return impl_->client.add(key, delta);
}

bool StoreClient::check(const std::string& key) { return impl_->client.check(key); }

void StoreClient::abort(const std::string& reason) noexcept { impl_->client.abort(reason); }

std::string StoreClient::abort_reason() { return impl_->client.abort_reason(); }

}  // namespace tessera::run
