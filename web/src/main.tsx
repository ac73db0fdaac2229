import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import '@xyflow/react/dist/style.css';
import './styles.css';
import { App } from './app';
import { adoptFragmentToken } from './auth';

// Before anything renders: a #token= fragment goes to session storage and
// leaves the address bar (and this history entry).
adoptFragmentToken(window.location, window.sessionStorage, window.history);

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
