import { installUint8ArrayToBase64 } from "./uint8array-to-base64.js";

// A module of its own so that importing it first installs the method before any module after
// it loads @bufbuild/protobuf.
installUint8ArrayToBase64();
