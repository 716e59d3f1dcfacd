/* The peer info's network address as a socket address. */
#include "transports/peer_info.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

int dccl_peer_net_addr(const struct dccl_peer_info *peer, struct sockaddr_storage *out) {
  memset(out, 0, sizeof(*out));
  out->ss_family = peer->net_family;
  if (peer->net_family == AF_INET)
    memcpy(&((struct sockaddr_in *)out)->sin_addr, peer->net_addr, 4);
  else if (peer->net_family == AF_INET6)
    memcpy(&((struct sockaddr_in6 *)out)->sin6_addr, peer->net_addr, 16);
  else
    return -1;
  return 0;
}
