#include "jbuf.h"

#include <stdlib.h>
#include <string.h>

void jbuf_init(jbuf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void jbuf_free(jbuf *b)
{
    free(b->data);
    jbuf_init(b);
}

void jbuf_clear(jbuf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static int jbuf_reserve(jbuf *b, size_t extra)
{
    size_t need = b->len + extra + 1;
    size_t cap;
    char *p;

    if (need <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 16;
    while (cap < need)
        cap *= 2;
    p = realloc(b->data, cap);
    if (!p)
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

int jbuf_append(jbuf *b, const char *s, size_t n)
{
    if (jbuf_reserve(b, n) != 0)
        return -1;
    if (n)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int jbuf_putc(jbuf *b, char c)
{
    return jbuf_append(b, &c, 1);
}

int jbuf_puts(jbuf *b, const char *s)
{
    return jbuf_append(b, s, strlen(s));
}

char *jbuf_detach(jbuf *b)
{
    char *p;

    if (jbuf_reserve(b, 0) != 0)
        return NULL;
    p = b->data;
    jbuf_init(b);
    return p;
}
