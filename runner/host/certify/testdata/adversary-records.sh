#!/bin/sh
# A hostile harness's attack on the evidence record (issue 35, attack 4),
# run as the task user by TestCertifyRecordsBoundedAndKept after the
# mini-agent's honest turn: eight Chat Completions requests, each of 1,000
# tool results whose ids are 4,000 bytes long (4 MB a request, within the
# relay's caps). It writes what it sent and the status it got into
# OUT/junk_N ("sent=BYTES status=LINE"), which the test captures.
# Usage: adversary-records.sh MODEL_URL OUT
url=$1 out=$2
mkdir -p "$out"
exec perl - "$url" "$out" "$FAKE_API_KEY" <<'PERL'
use strict;
use warnings;
use IO::Socket::IP;
my ($url, $out, $key) = @ARGV;
my ($hp, $base) = $url =~ m{^http://([^/]+)(/.*)?$} or die "bad url $url";
$base //= '';
my ($host, $port) = $hp =~ /^(.*):(\d+)$/;
for my $i (1 .. 8) {
    my $m = '{"role":"user","content":"junk"}';
    for my $j (1 .. 1000) {
        my $id = "junk-$i-$j-";
        $id .= 'j' x (4000 - length $id);
        $m .= ',{"role":"tool","tool_call_id":"' . $id . '","content":"x"}';
    }
    my $body = '{"model":"fake-model","messages":[' . $m . ']}';
    my $s = IO::Socket::IP->new(PeerHost => $host, PeerPort => $port) or die "connect $hp: $!";
    print $s "POST $base/chat/completions HTTP/1.1\r\nHost: $hp\r\nAuthorization: Bearer $key\r\n"
        . "Content-Type: application/json\r\nContent-Length: " . length($body) . "\r\nConnection: close\r\n\r\n" . $body;
    my $st = <$s> // '';
    $st =~ s/\s+$//;
    while (<$s>) {}
    close $s;
    open my $f, '>', "$out/junk_$i" or die "$out/junk_$i: $!";
    print $f "sent=" . length($body) . " status=$st\n";
    close $f;
}
PERL
