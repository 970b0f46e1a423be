/* The hot loop of bench.scaling's zmtp load generator (bench/_scaling_zmtp.py).
 *
 * Python connects, does the ZMTP handshake, the protocol's hello and the shard map, builds every
 * call frame, writes them to a spec file and execs this program with the connections open. What
 * is left is the loop, in C so that the generator costs the shared cores about 1 µs per call:
 * keep WINDOW calls outstanding on each connection; a reply frees one and the next call goes out
 * on the same connection (its agents in turn); writes and reads are batched per poll round.
 *
 * Spec file:  "ZD1 <duration> <peers>\n", then per peer "<fd> <window> <frames>\n", then per
 * frame "<length> <id offset>\n" and <length> bytes: a whole ZMTP frame holding a call whose id
 * is a msgpack uint32 (0xce + 4 bytes, big-endian) at <id offset>.
 * Output: "started\n" when the first calls go out, then one line of JSON:
 * {"calls", "errors", "seconds", "cpuSeconds"} (as the Python generators report), the latency
 * percentiles "latencyP50Us" and "latencyP99Us" (from queueing a call to reading its reply, 10 µs
 * resolution), and the fields given as the second argument.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define REPLY_TIMEOUT 30.0
#define READ_CHUNK (1 << 20)

/* msgpack {"type": "ping"} and {"type": "pong"} as ZMTP frames. */
static const unsigned char PING[] = {0, 11, 0x81, 0xa4, 't', 'y', 'p', 'e', 0xa4, 'p', 'i', 'n', 'g'};
static const unsigned char PONG[] = {0, 11, 0x81, 0xa4, 't', 'y', 'p', 'e', 0xa4, 'p', 'o', 'n', 'g'};
static const char RESULT_TYPE[] = "\xa4type\xa6result";
static const char ERROR_TYPE[] = "\xa4type\xa5" "error";

typedef struct {
    unsigned char *bytes;
    size_t length, id_at;
} Frame;

typedef struct {
    int fd;
    long window, outstanding, next_frame, frame_count;
    Frame *frames;
    unsigned char *in;
    size_t in_used;
    unsigned char *out;
    size_t out_used, out_size;
} Peer;

static void die(const char *what) {
    fprintf(stderr, "zmtp_drive: %s: %s\n", what, errno ? strerror(errno) : "bad input");
    exit(2);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu_seconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
           usage.ru_stime.tv_usec / 1e6;
}

static void queue(Peer *peer, const unsigned char *bytes, size_t length) {
    if (peer->out_used + length > peer->out_size) {
        peer->out_size = 2 * (peer->out_used + length);
        peer->out = realloc(peer->out, peer->out_size);
        if (!peer->out) die("realloc");
    }
    memcpy(peer->out + peer->out_used, bytes, length);
    peer->out_used += length;
}

static uint32_t next_id = 1;

/* Latency: each call's send time by id (ids are sequential, and fewer than SENT_SLOTS are ever
 * outstanding), and a histogram of 10 µs buckets up to LATENCY_BUCKETS * 10 µs. */
#define SENT_SLOTS (1 << 20)
#define LATENCY_BUCKETS 100000
static double sent_at[SENT_SLOTS];
static long latency[LATENCY_BUCKETS];
static long measured;

static void record_latency(uint32_t id, double t) {
    long bucket = (long)((t - sent_at[id % SENT_SLOTS]) * 1e5);
    latency[bucket < LATENCY_BUCKETS ? bucket : LATENCY_BUCKETS - 1]++;
    measured++;
}

static double latency_quantile(double q) {
    long seen = 0, rank = (long)(q * measured);
    for (long b = 0; b < LATENCY_BUCKETS; b++)
        if ((seen += latency[b]) > rank) return (b + 0.5) * 10.0;
    return LATENCY_BUCKETS * 10.0;
}

/* The call id of a reply: the msgpack unsigned integer after the key "id". */
static int reply_id(const unsigned char *body, size_t size, uint32_t *id) {
    const unsigned char *at = memmem(body, size < 32 ? size : 32, "\xa2id", 3);
    if (!at) return 0;
    at += 3;
    size_t left = size - (at - body);
    if (left >= 1 && at[0] < 0x80) return *id = at[0], 1;
    if (left >= 2 && at[0] == 0xcc) return *id = at[1], 1;
    if (left >= 3 && at[0] == 0xcd) return *id = at[1] << 8 | at[2], 1;
    if (left >= 5 && at[0] == 0xce)
        return *id = (uint32_t)at[1] << 24 | at[2] << 16 | at[3] << 8 | at[4], 1;
    return 0;
}

static void queue_call(Peer *peer) {
    Frame *frame = &peer->frames[peer->next_frame];
    peer->next_frame = (peer->next_frame + 1) % peer->frame_count;
    size_t at = peer->out_used;
    queue(peer, frame->bytes, frame->length);
    unsigned char *id = peer->out + at + frame->id_at;
    id[0] = next_id >> 24, id[1] = next_id >> 16, id[2] = next_id >> 8, id[3] = next_id;
    sent_at[next_id % SENT_SLOTS] = now();
    next_id++;
    peer->outstanding++;
}

static void flush(Peer *peer) {
    size_t sent = 0;
    while (sent < peer->out_used) {
        ssize_t n = write(peer->fd, peer->out + sent, peer->out_used - sent);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("write");
        }
        sent += n;
    }
    peer->out_used = 0;
}

/* Read what has come and handle every whole frame: answered calls count as results or errors
 * and free their slot for the next call while sending; pings are answered. */
static void on_readable(Peer *peer, int sending, long *results, long *errors) {
    ssize_t n = read(peer->fd, peer->in + peer->in_used, READ_CHUNK - peer->in_used);
    if (n == 0) die("the server closed a connection");
    if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) return;
        die("read");
    }
    peer->in_used += n;
    double received = now();
    size_t at = 0;
    while (peer->in_used - at >= 2) {
        size_t frame_at = at;
        unsigned char flags = peer->in[at];
        size_t size, start;
        if (flags & 0x02) {
            if (peer->in_used - at < 9) break;
            size = 0;
            for (int i = 1; i <= 8; i++) size = size << 8 | peer->in[at + i];
            start = at + 9;
        } else {
            size = peer->in[at + 1];
            start = at + 2;
        }
        /* A frame that starts late in the buffer fits once the memmove below brings it to the
         * front; only one larger than the whole buffer cannot be read. */
        if (start - frame_at + size > READ_CHUNK) die("a reply larger than the read buffer");
        if (peer->in_used - start < size) break;
        const unsigned char *body = peer->in + start;
        at = start + size;
        if (flags & 0x04) { /* a command: answer a ZMTP heartbeat PING with its context */
            if (size >= 7 && body[0] == 4 && memcmp(body + 1, "PING", 4) == 0) {
                unsigned char pong[2 + 5 + 255];
                size_t context = size - 7 < 250 ? size - 7 : 250;
                pong[0] = 0x04, pong[1] = 5 + context;
                memcpy(pong + 2, "\x04PONG", 5);
                memcpy(pong + 7, body + 7, context);
                queue(peer, pong, 7 + context);
            }
            continue;
        }
        if (flags & 0x01) die("a multipart reply (the protocol sends one part)");
        if (size == sizeof PING - 2 && memcmp(body, PING + 2, size) == 0) {
            queue(peer, PONG, sizeof PONG);
            continue;
        }
        /* The server writes "type" first: a result, an error, or a pong (no call's answer). */
        size_t head = size < 16 ? size : 16;
        if (memmem(body, head, RESULT_TYPE, sizeof RESULT_TYPE - 1))
            (*results)++;
        else if (memmem(body, head, ERROR_TYPE, sizeof ERROR_TYPE - 1))
            (*errors)++;
        else
            continue;
        uint32_t id;
        if (reply_id(body, size, &id)) record_latency(id, received);
        peer->outstanding--;
        if (sending) queue_call(peer);
    }
    memmove(peer->in, peer->in + at, peer->in_used - at);
    peer->in_used -= at;
}

static Peer *read_spec(const char *path, double *duration, int *count) {
    FILE *spec = fopen(path, "rb");
    if (!spec) die(path);
    if (fscanf(spec, "ZD1 %lf %d", duration, count) != 2 || *count < 1) die("spec header");
    Peer *peers = calloc(*count, sizeof *peers);
    for (int p = 0; p < *count; p++) {
        Peer *peer = &peers[p];
        if (fscanf(spec, " %d %ld %ld", &peer->fd, &peer->window, &peer->frame_count) != 3 ||
            peer->frame_count < 1)
            die("spec peer");
        peer->frames = calloc(peer->frame_count, sizeof *peer->frames);
        for (long f = 0; f < peer->frame_count; f++) {
            Frame *frame = &peer->frames[f];
            if (fscanf(spec, " %zu %zu", &frame->length, &frame->id_at) != 2 ||
                fgetc(spec) != '\n' || frame->id_at + 4 > frame->length)
                die("spec frame");
            frame->bytes = malloc(frame->length);
            if (fread(frame->bytes, 1, frame->length, spec) != frame->length) die("spec bytes");
        }
        peer->in = malloc(READ_CHUNK);
    }
    fclose(spec);
    return peers;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: zmtp_drive SPEC EXTRA-JSON-FIELDS\n");
        return 2;
    }
    double duration;
    int count;
    Peer *peers = read_spec(argv[1], &duration, &count);
    unlink(argv[1]);
    struct pollfd *fds = calloc(count, sizeof *fds);
    for (int p = 0; p < count; p++) fds[p].fd = peers[p].fd, fds[p].events = POLLIN;

    printf("started\n");
    fflush(stdout);
    double cpu = cpu_seconds(), started = now();
    double deadline = started + duration, next_ping = started + 1.0, last_reply = started;
    long results = 0, errors = 0, outstanding = 0;
    for (int p = 0; p < count; p++) {
        for (long w = 0; w < peers[p].window; w++) queue_call(&peers[p]);
        flush(&peers[p]);
        outstanding += peers[p].outstanding;
    }
    while (outstanding > 0) {
        double t = now();
        int sending = t < deadline;
        if (!sending && t > deadline + REPLY_TIMEOUT) break;
        if (t >= next_ping) { /* the server drops a peer silent for peerTimeoutMs */
            for (int p = 0; p < count; p++) queue(&peers[p], PING, sizeof PING);
            next_ping = t + 1.0;
        }
        double until = (sending && deadline < next_ping ? deadline : next_ping) - t;
        int timeout = until * 1000 < 1 ? 1 : (int)(until * 1000);
        for (int p = 0; p < count; p++) flush(&peers[p]);
        int ready = poll(fds, count, timeout);
        if (ready < 0 && errno != EINTR) die("poll");
        if (ready <= 0) continue;
        outstanding = 0;
        for (int p = 0; p < count; p++) {
            if (fds[p].revents & (POLLIN | POLLHUP | POLLERR))
                on_readable(&peers[p], sending, &results, &errors);
            outstanding += peers[p].outstanding;
        }
        last_reply = now();
    }
    double seconds = (last_reply > deadline ? last_reply : deadline) - started;
    double cpu_used = cpu_seconds() - cpu;
    printf("{\"calls\": %ld, \"errors\": %ld, \"seconds\": %.6f, \"cpuSeconds\": %.6f, "
           "\"latencyP50Us\": %.0f, \"latencyP99Us\": %.0f, %s}\n",
           results, errors + outstanding, seconds, cpu_used, latency_quantile(0.5),
           latency_quantile(0.99), argv[2]);
    return 0;
}
