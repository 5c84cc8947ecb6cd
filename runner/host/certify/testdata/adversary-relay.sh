#!/bin/sh
# A hostile harness's attacks on the model relay (issue 20), run as the
# task user by TestCertifyHostileRelay after the mini-agent's turn.
# Usage: adversary-relay.sh MODE MODEL_URL HOME, MODE one of
#   stall   16 requests, each 60 MiB of a body whose Content-Length is one
#           byte more, held open
#   flood   40 complete requests, each with 4,000 tool results of 4 KiB
#   canary  the key ($FAKE_API_KEY) in a query string, a header, a user
#           message, hex in a tool result, and hex split and reversed in
#           two tool results; then one clean request
# It writes what it sent and the status it got, one file per request, into
# HOME/adv, which the test captures: "sent=BYTES status=CODE".
mode=$1 url=$2 home=$3
out=$home/adv
mkdir -p "$out"
exec perl - "$mode" "$url" "$out" "$FAKE_API_KEY" <<'PERL'
use strict;
use warnings;
use IO::Socket::IP;
use POSIX ();
$SIG{PIPE} = 'IGNORE';
my ($mode, $url, $out, $key) = @ARGV;
my ($hp, $base) = $url =~ m{^http://([^/]+)(/.*)?$} or die "bad url $url";
$base //= '';
my ($host, $port) = $hp =~ /^(.*):(\d+)$/;

sub put {
    my ($name, $text) = @_;
    open my $f, '>', "$out/$name" or die "$out/$name: $!";
    print $f $text;
    close $f;
}

# send: one request on its own connection. The answer is read by a child
# while the parent writes, so an answer that comes before the body is
# whole (the relay's 413) is seen even if the connection is reset after.
# $cl is the Content-Length, $n the body bytes written ($body repeated),
# $hold how long to wait for an answer after the last byte.
sub send_req {
    my ($name, $target, $hdrs, $body, $cl, $n, $hold) = @_;
    my $s = IO::Socket::IP->new(PeerHost => $host, PeerPort => $port) or die "connect $hp: $!";
    pipe(my $r, my $w) or die;
    my $pid = fork // die;
    if ($pid == 0) {
        close $r;
        my $buf = '';
        # syswrite: _exit flushes no buffer.
        local $SIG{ALRM} = sub { syswrite($w, "0"); POSIX::_exit(0) };
        alarm($hold);
        while (sysread($s, my $part, 4096)) {
            $buf .= $part;
            last if $buf =~ /\r\n/;
        }
        my ($st) = $buf =~ m{^HTTP/1\.\d (\d+)};
        syswrite($w, $st // 0);
        POSIX::_exit(0);
    }
    close $w;
    my $head = "POST $target HTTP/1.1\r\nHost: $hp\r\nAuthorization: Bearer $key\r\nContent-Type: application/json\r\nContent-Length: $cl\r\n$hdrs\r\n";
    my $sent = 0;
    if (defined syswrite($s, $head)) {
        while ($sent < $n) {
            my $k = syswrite($s, $body, length($body) < $n - $sent ? length($body) : $n - $sent);
            last unless defined $k;
            $sent += $k;
        }
    }
    my $st = <$r>;
    waitpid($pid, 0);
    close $s;
    put($name, "sent=$sent status=$st\n");
}

# A chat completions body with these tool results.
sub chat {
    my ($user, @results) = @_;
    my $m = '{"role":"user","content":"' . $user . '"}';
    my $i = 0;
    for (@results) {
        $i++;
        $m .= ',{"role":"tool","tool_call_id":"c' . $i . '","content":"' . $_ . '"}';
    }
    return '{"model":"fake-model","messages":[' . $m . ']}';
}

if ($mode eq 'stall') {
    my $size = 60 << 20;
    my $chunk = 'a' x (1 << 20);
    my @kids;
    for my $i (1 .. 16) {
        my $pid = fork // die;
        if ($pid == 0) {
            send_req("stall_$i", "$base/chat/completions", '', $chunk, $size + 1, $size, 30);
            POSIX::_exit(0);
        }
        push @kids, $pid;
    }
    waitpid($_, 0) for @kids;
} elsif ($mode eq 'flood') {
    my $body = chat('go', map { sprintf('%04d', $_) x 1024 } 1 .. 4000);
    for my $i (1 .. 40) {
        send_req("flood_$i", "$base/chat/completions", '', $body, length $body, length $body, 30);
    }
} elsif ($mode eq 'canary') {
    my $hex = unpack('H*', $key);
    my $half = int(length($hex) / 2);
    my @reqs = (
        ['canary_query', "$base/chat/completions?note=$key", '', chat('hi')],
        ['canary_header', "$base/chat/completions", "X-Note: $key\r\n", chat('hi')],
        ['canary_user', "$base/chat/completions", '', chat("my key is $key")],
        ['canary_hex', "$base/chat/completions", '', chat('go', $hex)],
        ['split_reversed', "$base/chat/completions", '', chat('go', scalar reverse(substr($hex, 0, $half)), scalar reverse(substr($hex, $half)))],
        ['clean', "$base/chat/completions", '', chat('hello')],
    );
    for (@reqs) {
        my ($name, $target, $hdrs, $body) = @$_;
        send_req($name, $target, $hdrs, $body, length $body, length $body, 30);
    }
} else {
    die "unknown mode $mode";
}
PERL
