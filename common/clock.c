// clock.c - the monotonic clock, for deadlines, intervals and pacing.
#include "acpsnap.h"

#include <time.h>

long as_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}
