#!/bin/bash
# /setup.sh of the QUIC Interop Runner's endpoint image (quic-interop/quic-network-simulator,
# endpoint/setup.sh), rewritten here command for command: the network set-up for the
# simulator's two Docker networks (client 193.167.0.0/24, server 193.167.100.0/24, simulator at
# .2 of each). Every QIR image's /run_endpoint.sh runs it first.
#
# WARNING: it changes the network of whatever namespace it runs in. Run with CAP_NET_ADMIN on
# host networking it would switch off TX checksum offload of the host's eth0, add a route to
# 193.167.0.0/16 and delete the host's own /24 and /64 routes of its first addresses. The
# runner of this project therefore never lets it act on a node (docs/implementations.md,
# "Implementations as container images"); without CAP_NET_ADMIN every command fails with
# "Operation not permitted" and nothing changes.
#
# Like QIR's, it stops at no error (no `set -e`): each step is tried, the last status returned.
set -uo pipefail

echo "Setting up routes..."
# By default, docker containers don't compute UDP / TCP checksums.
# When packets run through ns3 however, the receiving endpoint requires valid checksums.
# This command makes sure that the endpoints set the checksum on outgoing packets.
ethtool -K eth0 tx off

# this relies on the IPv4 address being first in the "hostname -I" output
IP=$(hostname -I | cut -f1 -d" ")
GATEWAY="${IP%.*}.2"
UNNEEDED_ROUTE="${IP%.*}.0"
echo "Endpoint's IPv4 address is $IP"

route add -net 193.167.0.0 netmask 255.255.0.0 gw "$GATEWAY"
# delete unused route
route del -net "$UNNEEDED_ROUTE" netmask 255.255.255.0

# this relies on the IPv6 address being second in the "hostname -I" output
IP=$(hostname -I | cut -f2 -d" ")
GATEWAY="${IP%:*}:2"
UNNEEDED_ROUTE="${IP%:*}:"
echo "Endpoint's IPv6 address is $IP"

ip -d route add fd00:cafe:cafe::/48 via "$GATEWAY"
# delete unused route
ip -d route del "$UNNEEDED_ROUTE/64"

# create the /logs and the /logs/qlog directory
mkdir -p /logs/qlog
