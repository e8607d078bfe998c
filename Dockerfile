# Cairn. The image runs `cairn serve` by default; the command `worker` runs `cairn worker`.
# Cairn runs compiled JavaScript (dist/, bin/build.js with esbuild, which comes with tsx); the web
# console is built in a stage of its own with the build tools of devDependencies, and its built
# files copied in.
# It is meant for DATABASE_URL and TEMPORAL_ADDRESS set (see docker-compose.yml): it carries no
# Temporal CLI for the embedded dev server.
FROM node:20-bookworm-slim AS console
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY ui ui
RUN node ui/build.mjs

FROM node:20-bookworm-slim

# The bash and python tools run these on the machine that executes the run; every run executes in
# a bubblewrap sandbox with its own network through slirp4netns (docs/operations.md, Security model).
RUN apt-get update \
 && apt-get install -y --no-install-recommends bash python3 ansible ca-certificates bubblewrap slirp4netns openssl \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app

COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force

COPY . .
COPY --from=console /app/ui/dist ui/dist

# The server compiled to dist/, which bin/cairn.js runs (the sources were not copied in yet when
# the packages were installed).
RUN node bin/build.js

# The workflow bundle, built once here rather than at every start (/app is not writable by `node`).
RUN node bin/run-ts.js workers/build-bundle.ts

# Only an embedded PostgreSQL would write here; the directory exists so that mode also works.
RUN mkdir -p /var/lib/cairn && chown node:node /var/lib/cairn

# glibc's malloc, held to what it uses (docs/operations.md, Memory; bench section (l) runs its
# server with these same MALLOC_ settings, read from here):
# - two arenas rather than one per thread (Temporal's core and libuv's pool allocate from their
#   own threads);
# - blocks of 128 KiB and more mapped and unmapped on their own, at a fixed threshold: glibc
#   otherwise raises the threshold as large blocks are freed, and a log firehose's buffers then
#   stay in the arenas after the run.
ENV CAIRN_LISTEN=0.0.0.0:8080 \
    CAIRN_DATA_DIR=/var/lib/cairn \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=131072

USER node
EXPOSE 8080

ENTRYPOINT ["node", "bin/cairn.js"]
CMD ["serve"]
