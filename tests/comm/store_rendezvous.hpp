// A rendezvous with a real TCP store served in this process (one rank), for tests that create a
// plugin backend without launching processes (plugin_test.cpp, stream_order_test.cpp).
#pragma once

#include <string>

#include "tessera/comm/backend.hpp"
#include "tessera/comm/tcp_store.hpp"

namespace tessera::test {

class StoreRendezvous final : public comm::Rendezvous {
 public:
  StoreRendezvous()
      : server_({"127.0.0.1", 0, "t", -1, [](const std::string&) {}}),
        client_(opts(server_.port())) {}
  std::string describe() const override { return "test"; }
  comm::Store* store() override { return &client_; }

 private:
  static comm::TcpStoreClient::Options opts(int port) {
    comm::TcpStoreClient::Options o;
    o.port = port;
    o.token = "t";
    o.rank = 0;
    return o;
  }
  comm::TcpStoreServer server_;
  comm::TcpStoreClient client_;
};

}  // namespace tessera::test
