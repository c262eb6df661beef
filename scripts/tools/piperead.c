// How fast one thread reads 1080p I420 frames from a pipe (standard input), by where the
// bytes go and how it waits: the pipe hop's reading side alone (scripts/pipehop.sh).
//   piperead MODE   (MODE: hot | slots | huge | slots-batch | huge-batch | slots-locked)
// hot: a 128 KB buffer read again and again (as cat does); slots: 8 frame buffers in turn
// (as the ring's slots); huge: the same on transparent huge pages; -batch: when the pipe
// holds less than the frame's rest and under 512 KB and is filling, sleep 50 us instead of
// blocking in read (fewer wake-ups of this thread and of the writer; a pipe that stops
// filling is read at once); locked: slots mlock'ed.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "hot";
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
