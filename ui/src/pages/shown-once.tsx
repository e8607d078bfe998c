import { Alert, Button, Code, CopyButton, Group, Modal, Stack, Text } from '@mantine/core';

/**
 * A value the server shows once (a hook path, a signing secret, a new token): displayed in a
 * dialog until it is closed, then dropped from the page's state; it is never kept anywhere.
 */
export function ShownOnce({ title, values, onClose }: { title: string; values: { label: string; value: string }[] | null; onClose: () => void }) {
  return (
    <Modal opened={values !== null} onClose={onClose} title={title} size="lg" closeOnClickOutside={false}>
      <Stack>
        <Alert color="orange" title="Shown this once">
          Copy it now: Cairn keeps only a hash or a sealed copy and will not show it again.
        </Alert>
        {(values ?? []).map(({ label, value }) => (
          <div key={label}>
            <Text size="sm" fw={600}>{label}</Text>
            <Group gap="xs" wrap="nowrap" align="flex-start">
              <Code block className="secret-once" aria-label={label}>{value}</Code>
              <CopyButton value={value}>
                {({ copied, copy }) => (
                  <Button size="xs" variant="default" onClick={copy} aria-label={`Copy ${label}`}>
                    {copied ? 'Copied' : 'Copy'}
                  </Button>
                )}
              </CopyButton>
            </Group>
          </div>
        ))}
        <Group justify="flex-end">
          <Button onClick={onClose}>I have copied it</Button>
        </Group>
      </Stack>
    </Modal>
  );
}
