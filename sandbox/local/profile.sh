# leafcost sandbox: a minimal login profile, so `bash -l` costs a shell start and nothing more.
