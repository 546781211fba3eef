# One image, two commands: `node dist/src/cli.js api` and `node dist/src/cli.js worker`.
FROM node:20-bookworm-slim AS build
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
# onnxruntime-node's install script would fetch CUDA files; the CPU binaries ship in the package.
ENV ONNXRUNTIME_NODE_INSTALL=skip
COPY package.json package-lock.json .npmrc ./
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src src
COPY workers workers
COPY bench bench
COPY dashboard dashboard
COPY migrations migrations
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
ENV NODE_ENV=production DATA_DIR=/data HOST=0.0.0.0 PORT=20128
# glibc: 2 malloc arenas instead of up to 8 per core (native memory freed by one thread is reused by the others; src/heap-growth.ts).
ENV MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY migrations migrations
COPY package.json ./
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME /data
EXPOSE 20128
HEALTHCHECK --interval=10s --timeout=3s --retries=3 CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||20128)+'/healthz').then(r=>process.exit(r.ok?0:1)).catch(()=>process.exit(1))"
CMD ["node", "dist/src/cli.js", "api"]
