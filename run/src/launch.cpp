// StoreServer over comm::TcpStoreServer.
#include "tessera/run/launch.hpp"

#include "tessera/comm/tcp_store.hpp"

namespace tessera::run {

struct StoreServer::Impl {
  explicit Impl(comm::TcpStoreServer::Options o) : server(std::move(o)) {}
  comm::TcpStoreServer server;
};

namespace {
comm::TcpStoreServer::Options server_options(StoreServer::Options o) {
  comm::TcpStoreServer::Options so;
  so.host = std::move(o.host);
  so.port = o.port;
  so.token = std::move(o.token);
  so.log = std::move(o.log);
  return so;
}
}  // namespace

StoreServer::StoreServer(Options options)
    : impl_(std::make_unique<Impl>(server_options(std::move(options)))) {}

StoreServer::~StoreServer() = default;

int StoreServer::port() const noexcept { return impl_->server.port(); }

void StoreServer::abort(const std::string& reason) { impl_->server.abort(reason); }

}  // namespace tessera::run
