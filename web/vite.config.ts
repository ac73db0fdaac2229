import { defineConfig } from 'vitest/config';
import react from '@vitejs/plugin-react';

// The canvas is served by the API under /ui/ (web/embed.go) from dist/,
// which is committed: `make web` rebuilds it and `make web-check` fails when
// the committed bundle differs from what the sources build.
export default defineConfig({
  base: '/ui/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    // One predictable set of files: hashed names for long caching.
    assetsDir: 'assets',
    chunkSizeWarningLimit: 4096,
  },
  server: {
    // `npm run dev` against a running `weft dev` (make dev) on :8080.
    proxy: { '/v1': 'http://localhost:8080' },
  },
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node',
    // CI shares 2 cores with Go builds, a dev server and Chromium: the first
    // ELK layout (loading elkjs) has taken over vitest's default 5 s there.
    // Speed is measured by benchmarks, never by a test's deadline.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
