# Multi-stage build: compile devui with the Go toolchain, ship it alone on a small runtime image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/devui ./cmd/devui

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/devui /usr/local/bin/devui
EXPOSE 4000
USER nonroot
ENTRYPOINT ["/usr/local/bin/devui"]
CMD ["serve"]
