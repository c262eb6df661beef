// How fast one thread reads 1080p I420 frames from a pipe (standard input), by where the
// bytes go and how it waits: the pipe hop's reading side alone (scripts/pipehop.sh).
//   piperead MODE   (MODE: hot | slots | huge | slots-batch | huge-batch | slots-locked
//                    | relayN | relayN-locked)
// hot: a 128 KB buffer read again and again (as cat does); slots: 8 frame buffers in turn
// (as the ring's slots); huge: the same on transparent huge pages; -batch: when the pipe
// holds less than the frame's rest and under 512 KB and is filling, sleep 50 us instead of
// blocking in read (fewer wake-ups of this thread and of the writer; a pipe that stops
// filling is read at once); locked: slots mlock'ed.
// relayN (N slots, say relay8): framepipe's hop without the GPU: one thread reads each frame
// (with its FRAME line) into the next of N frame buffers, a second thread writes each whole
// frame to standard output with one write, as framepipe's capture and sink threads do; a
// buffer is read into again only once it was written out. relayN-bounce: the same, each
// thread going through a 128 KB buffer of its own (read into it, then copied into the
// frame buffer; copied out of the frame buffer into it, then written), so that the pipe's
// copies, made under the pipe's lock, touch memory hot in the core's cache, as cat's do.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static char *rbuf;
static size_t rslots, rframe, rdone;
static sem_t rfree, rfull;
static double rwrite_s;
static int rbounce;
#define BOUNCE 131072

static void *relay_writer(void *arg) {
    (void)arg;
    struct timespec a, b;
    for (size_t k = 0;; k++) {
        sem_wait(&rfull);
        if (k == rdone) break;
        char *src = rbuf + (k % rslots) * rframe;
        static char stage[BOUNCE];
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (size_t put = 0; put < rframe;) {
            size_t want = rframe - put;
            const char *from = src + put;
            if (rbounce) {
                if (want > BOUNCE) want = BOUNCE;
                memcpy(stage, from, want);
                from = stage;
            }
            for (size_t done = 0; done < want;) {
                ssize_t n = write(1, from + done, want - done);
                if (n <= 0) { perror("write"); exit(1); }
                done += n;
            }
            put += want;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        rwrite_s += (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
        sem_post(&rfree);
    }
    return NULL;
}

// Reads y4m frames (1080p I420, "FRAME\n" first) into N buffers in turn; a second thread
// writes them out (see the top).
static int relay(const char *mode) {
    rslots = strtoul(mode + 5, NULL, 10);
    if (rslots < 1) rslots = 8;
    rbounce = strstr(mode, "bounce") != NULL;
    static char stage[BOUNCE];
    size_t body = 1920 * 1080 * 3 / 2;
    rframe = body + 6;
    fcntl(0, F_SETPIPE_SZ, 1 << 20);
    fcntl(1, F_SETPIPE_SZ, 1 << 20);
    rbuf = mmap(NULL, rslots * rframe, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(rbuf, 1, rslots * rframe);
    if (strstr(mode, "locked") && mlock(rbuf, rslots * rframe)) perror("mlock");
    // The stream's header line goes through as it is.
    char line[256];
    size_t h = 0;
    while (h < sizeof line - 1 && read(0, line + h, 1) == 1 && line[h++] != '\n') {}
    if (write(1, line, h) != (ssize_t)h) return 1;
    sem_init(&rfree, 0, rslots);
    sem_init(&rfull, 0, 0);
    rdone = (size_t)-1;
    pthread_t w;
    pthread_create(&w, NULL, relay_writer, NULL);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    size_t k = 0;
    for (;; k++) {
        sem_wait(&rfree);
        char *dst = rbuf + (k % rslots) * rframe;
        size_t got = 0;
        while (got < rframe) {
            size_t want = rframe - got;
            if (rbounce && want > BOUNCE) want = BOUNCE;
            ssize_t n = read(0, rbounce ? stage : dst + got, want);
            if (n <= 0) break;
            if (rbounce) memcpy(dst + got, stage, n);
            got += n;
        }
        if (got < rframe) break;
        sem_post(&rfull);
    }
    rdone = k;
    sem_post(&rfull);
    pthread_join(w, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
    fprintf(stderr,
            "%-13s %zu frames in %.2f s = %.0f fps; writer in write() %.3f ms/frame; "
            "user %.2f s, sys %.2f s, voluntary switches %ld, involuntary %ld\n",
            mode, k, s, k / s, rwrite_s * 1e3 / (k ? k : 1),
            r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6, r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6,
            r.ru_nvcsw, r.ru_nivcsw);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "hot";
    if (!strncmp(mode, "relay", 5)) return relay(mode);
    size_t frame = 1920 * 1080 * 3 / 2, slots = 8, huge = 2u << 20;
    int hot = !strcmp(mode, "hot"), batch = strstr(mode, "batch") != NULL;
    fcntl(0, F_SETPIPE_SZ, 1 << 20);
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    size_t bytes = hot ? 131072 : slots * frame;
    char *buf = mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    buf = (char *)(((size_t)buf + huge - 1) & ~(huge - 1));
    if (strstr(mode, "huge")) madvise(buf, bytes, MADV_HUGEPAGE);
    memset(buf, 1, bytes);
    if (strstr(mode, "locked") && mlock(buf, bytes)) perror("mlock");
    size_t total = 0, k = 0, reads = 0, sleeps = 0;
    int last = -1;
    struct timespec a, b, nap = {0, 50000};
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (;;) {
        char *dst = hot ? buf : buf + (k % slots) * frame;
        size_t want = hot ? 131072 : frame, got = 0;
        while (got < want) {
            if (batch) {
                int queued = 0;
                ioctl(0, FIONREAD, &queued);
                if ((size_t)queued < want - got && queued < (512 << 10) && queued > last) {
                    last = queued;
                    nanosleep(&nap, NULL);
                    sleeps++;
                    continue;
                }
                last = -1;
            }
            ssize_t n = read(0, dst + got, want - got);
            reads++;
            if (n <= 0) goto end;
            got += n;
        }
        total += got;
        k++;
    }
end:
    clock_gettime(CLOCK_MONOTONIC, &b);
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    double w = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
    double frames = total / (double)frame;
    fprintf(stderr,
            "%-13s %.0f frames in %.2f s = %.0f fps; reads/frame %.1f, sleeps/frame %.1f; "
            "user %.2f s, sys %.2f s, voluntary switches %ld, involuntary %ld\n",
            mode, frames, w, frames / w, reads / frames, sleeps / frames,
            r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6, r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6,
            r.ru_nvcsw, r.ru_nivcsw);
    return 0;
}
