#ifndef MINIJSON_JBUF_H
#define MINIJSON_JBUF_H

#include <stddef.h>

/* Growable, always NUL-terminated byte buffer. */
typedef struct {
    char *data;
    size_t len;
    size_t cap;
} jbuf;

void jbuf_init(jbuf *b);
void jbuf_free(jbuf *b);
void jbuf_clear(jbuf *b);
int jbuf_append(jbuf *b, const char *s, size_t n);
int jbuf_putc(jbuf *b, char c);
int jbuf_puts(jbuf *b, const char *s);
/* Returns the data (caller frees) and resets the buffer. Never NULL on success. */
char *jbuf_detach(jbuf *b);

#endif
