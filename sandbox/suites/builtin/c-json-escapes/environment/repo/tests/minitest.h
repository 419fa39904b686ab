#ifndef MINITEST_H
#define MINITEST_H

#include <stdio.h>
#include <string.h>

static int mt_failures;
static int mt_current_failed;

#define CHECK(cond) do { \
    if (!(cond)) { \
        printf("    %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        mt_current_failed = 1; \
    } \
} while (0)

#define CHECK_MEM(got, got_len, want, want_len) do { \
    if ((got_len) != (want_len) || memcmp((got), (want), (want_len)) != 0) { \
        printf("    %s:%d: bytes differ (got %lu bytes, want %lu)\n", __FILE__, __LINE__, \
               (unsigned long)(got_len), (unsigned long)(want_len)); \
        mt_current_failed = 1; \
    } \
} while (0)

#define RUN(test) do { \
    mt_current_failed = 0; \
    test(); \
    printf("%s %s\n", mt_current_failed ? "FAIL" : "ok  ", #test); \
    if (mt_current_failed) mt_failures++; \
} while (0)

#define MT_EXIT() (printf("\n%s (%d failing)\n", mt_failures ? "FAILED" : "PASSED", mt_failures), \
                   mt_failures ? 1 : 0)

#endif
