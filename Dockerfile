# weft: one static binary (`weft api`, `weft worker`, `weft migrate`, `weft token`).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/weft ./cmd/weft

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/weft /usr/local/bin/weft
ENV WEFT_HTTP_ADDR=:8080 \
    WEFT_DATA_DIR=/tmp/weft
EXPOSE 8080
USER nonroot
ENTRYPOINT ["/usr/local/bin/weft"]
CMD ["api"]
