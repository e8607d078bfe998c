import '@mantine/core/styles.css';
import './console.css';
import { MantineProvider, Modal, createTheme } from '@mantine/core';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { Shell } from './shell';
import { SessionProvider } from './session';

const theme = createTheme({
  primaryColor: 'blue',
  fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif',
  fontFamilyMonospace: 'ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace',
  focusRing: 'always',
  components: {
    // Locking the page's scroll injects a <style> element, which the Content-Security-Policy refuses.
    Modal: Modal.extend({ defaultProps: { lockScroll: false, closeButtonProps: { 'aria-label': 'Close the dialog' } } }),
  },
});

// Mantine's static stylesheet carries the default theme's variables, so the provider injects no
// <style> element (the Content-Security-Policy admits no inline style).
createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <MantineProvider theme={theme} withCssVariables={false} withGlobalClasses={false} forceColorScheme="light">
      <SessionProvider>
        <Shell />
      </SessionProvider>
    </MantineProvider>
  </StrictMode>,
);
