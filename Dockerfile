# jetcron application image: one image for every role.
#   docker build -t jetcron .
#   docker run -e NATS_URL=... -e DATABASE_URL=... -p 8080:8080 jetcron
# The role set is chosen by the command (see docker-compose.yml), e.g.
#   node bin/jetcron.mjs serve --roles dispatcher

# Sources without any node_modules, .git or local data the build context holds.
FROM node:24-bookworm-slim AS source
WORKDIR /src
COPY . .
RUN rm -rf node_modules .git .jetcron tmp

# Runtime dependencies exactly as locked.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080
WORKDIR /app
COPY --from=source --chown=node:node /src ./
COPY --from=deps --chown=node:node /app/node_modules ./node_modules
USER node
EXPOSE 8080
# No HEALTHCHECK here: the roles, and so what a container serves, are chosen per
# container; docker-compose.yml checks GET /healthz on the api service.
# The image has no nats-server: set NATS_URL and DATABASE_URL (the embedded
# default of `serve` is for development, not for this image).
CMD ["node", "bin/jetcron.mjs", "serve"]
