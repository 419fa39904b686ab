"""What the sandbox backends share: the standard-library tool runner that executes Leaf's tools inside a sandbox
and the client that talks to it, the host's confined reads of trees a sandbox wrote, owner records of leftovers,
the git baseline patch capture and the verifier rely on, and the Dockerfile parser and tree digests that a
bubblewrap replay and an image build both rest on."""
